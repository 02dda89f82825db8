#pragma once

// Private: the wire codecs on CUDA tensors, through the project's kernels
// (cuda/wire_codec_kernels.cu). Defined in cuda_wire_codec.cpp, which is
// compiled only when ASTEROID_WITH_CUDA is set; wire_codec.cpp dispatches.

#include "asteroid/kernels/wire_codec.hpp"

namespace asteroid::kernels::detail {

/// encode() of a floating CUDA tensor under a codec other than none.
encoded_tensor cuda_encode(const torch::Tensor& x, wire_codec c);

/// decode() of checked CUDA values (and, for int8, scales on any device).
torch::Tensor cuda_decode(const encoded_tensor& e, wire_codec c);

} // namespace asteroid::kernels::detail
