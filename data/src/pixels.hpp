#pragma once

// Internal to asteroid_data: byte images to normalised float32.

#include <vector>

#include <torch/torch.h>

namespace asteroid::data::detail {

/// float32 copy of a contiguous uint8 tensor [N, C, ...]: pixel / 255, then
/// (x - mean[c]) / stdev[c] per channel c (mean 0, stdev 1 skips normalisation).
///
/// One pass through a 256-entry table per channel, instead of a chain of torch ops that would each
/// sweep the whole float copy (188 MB for Fashion-MNIST) again.
torch::Tensor bytes_to_float(const torch::Tensor& pixels, const std::vector<double>& mean,
                             const std::vector<double>& stdev);

} // namespace asteroid::data::detail
