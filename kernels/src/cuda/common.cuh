#pragma once

// Private: what the project's .cu files share (launch shape, error check,
// the element loads and stores of the half types). Included by nvcc only.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <string>

namespace asteroid::kernels::cuda::detail {

constexpr int threads = 256;

inline void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess)
    throw std::runtime_error(std::string("CUDA ") + what + ": " + cudaGetErrorString(err));
}

/// Blocks of a grid-stride loop over `n` elements: enough to fill the GPU,
/// few enough that each thread does several elements on large tensors.
inline unsigned blocks_for(std::size_t n) {
  return static_cast<unsigned>(
    std::max<std::size_t>(1, std::min<std::size_t>((n + threads - 1) / threads, 4096)));
}

/// Element loads and stores in float (half types) or the type's own
/// precision; conversions round to nearest even, as c10's do on the CPU.
template <class T>
struct math {
  __device__ static float load(T x) { return static_cast<float>(x); }
  __device__ static T store(float x) { return static_cast<T>(x); }
};
template <>
struct math<__half> {
  __device__ static float load(__half x) { return __half2float(x); }
  __device__ static __half store(float x) { return __float2half_rn(x); }
};
template <>
struct math<__nv_bfloat16> {
  __device__ static float load(__nv_bfloat16 x) { return __bfloat162float(x); }
  __device__ static __nv_bfloat16 store(float x) { return __float2bfloat16_rn(x); }
};

} // namespace asteroid::kernels::cuda::detail
