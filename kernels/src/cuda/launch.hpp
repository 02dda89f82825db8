#pragma once

// Private: raw-pointer entry points of the CUDA kernels. Plain C++ (no torch,
// no CUDA headers) so that the .cu file compiles with nvcc alone and the torch
// glue (cuda_ops.cpp) compiles with the host compiler alone.

#include <cstddef>

namespace asteroid::kernels::cuda {

/// One contiguous byte range to copy, device pointers.
struct copy_job {
  const void* src;
  void* dst;
  std::size_t bytes;
};

enum class float_kind { f32, f64, f16, bf16 };

/// Runs all `n_jobs` copies (array in device memory) in one launch on
/// `stream` (a cudaStream_t). `max_bytes` is the largest job. Throws
/// std::runtime_error on a launch error.
void batched_copy(const copy_job* jobs_on_device, std::size_t n_jobs, std::size_t max_bytes,
                  void* stream);

/// dst[i] += weight * src[i] for i < n. Half types accumulate in float.
void axpy(void* dst, const void* src, std::size_t n, double weight, float_kind kind,
          void* stream);

/// data[i] *= factor for i < n.
void scale(void* data, std::size_t n, double factor, float_kind kind, void* stream);

} // namespace asteroid::kernels::cuda
