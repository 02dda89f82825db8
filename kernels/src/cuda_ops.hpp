#pragma once

// Private: CUDA versions of the bucket copy and scaling routines. Defined in
// cuda_ops.cpp, which is compiled only when ASTEROID_WITH_CUDA is set.

#include "asteroid/kernels/bucket.hpp"

namespace asteroid::kernels::detail {

/// The current CUDA stream of `device`, as the kernels' `void* stream`.
void* current_stream(const torch::Device& device);

/// Copies contiguous CUDA `grads` into `b.flat` with one kernel launch.
void cuda_flatten(bucket& b, const std::vector<torch::Tensor>& grads);

/// Copies `b.flat` back into contiguous CUDA `grads` with one kernel launch.
void cuda_unflatten(const bucket& b, std::vector<torch::Tensor>& grads);

/// dst += weight * src for contiguous CUDA tensors of one floating dtype.
void cuda_weighted_sum(torch::Tensor& dst, const torch::Tensor& src, double weight);

/// t *= factor for a contiguous CUDA tensor of a floating dtype.
void cuda_scale(torch::Tensor& t, double factor);

} // namespace asteroid::kernels::detail
