#pragma once

#include <torch/torch.h>

namespace asteroid::kernels {

/// Accumulates `dst += weight * src` in place.
///
/// The building block of share-weighted all-reduce: a device that processed
/// a fraction `w_i` of the global batch contributes `w_i * g_i`. `dst` and
/// `src` must have the same shape, floating dtype and device; throws
/// std::invalid_argument otherwise. CUDA tensors use the CUDA kernel when the
/// build has one, ATen otherwise.
void weighted_sum_(torch::Tensor& dst, const torch::Tensor& src, double weight);

/// Multiplies `t` by `factor` in place (floating dtypes only).
void scale_(torch::Tensor& t, double factor);

} // namespace asteroid::kernels
