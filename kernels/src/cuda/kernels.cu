// CUDA kernels behind the bucket and weighted-sum routines (see launch.hpp).

#include "common.cuh"
#include "launch.hpp"

#include <cstdint>

namespace asteroid::kernels::cuda {

namespace {

using detail::blocks_for;
using detail::check;
using detail::math;
using detail::threads;

// Grid y is limited to 65535; larger job lists are launched in slices.
constexpr std::size_t max_jobs_per_launch = 65535;

// One job per grid row; the blocks of a row stride over its bytes. Uses
// 16-byte moves when both ends allow it: slot offsets inside a bucket are
// only element-aligned, so the 4-byte and byte paths are needed too.
__global__ void batched_copy_kernel(const copy_job* jobs) {
  const copy_job job = jobs[blockIdx.y];
  const auto src = reinterpret_cast<std::uintptr_t>(job.src);
  const auto dst = reinterpret_cast<std::uintptr_t>(job.dst);
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const std::size_t tid = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (((src | dst) & 15) == 0) {
    const std::size_t n = job.bytes / 16;
    auto s = reinterpret_cast<const uint4*>(job.src);
    auto d = reinterpret_cast<uint4*>(job.dst);
    for (std::size_t i = tid; i < n; i += stride)
      d[i] = s[i];
    for (std::size_t i = n * 16 + tid; i < job.bytes; i += stride)
      static_cast<char*>(job.dst)[i] = static_cast<const char*>(job.src)[i];
  } else if (((src | dst) & 3) == 0) {
    const std::size_t n = job.bytes / 4;
    auto s = reinterpret_cast<const std::uint32_t*>(job.src);
    auto d = reinterpret_cast<std::uint32_t*>(job.dst);
    for (std::size_t i = tid; i < n; i += stride)
      d[i] = s[i];
    for (std::size_t i = n * 4 + tid; i < job.bytes; i += stride)
      static_cast<char*>(job.dst)[i] = static_cast<const char*>(job.src)[i];
  } else {
    for (std::size_t i = tid; i < job.bytes; i += stride)
      static_cast<char*>(job.dst)[i] = static_cast<const char*>(job.src)[i];
  }
}

// float/double compute in their own precision; half types in float.
template <class T, class Acc>
__global__ void axpy_kernel(T* dst, const T* src, std::size_t n, Acc w) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    dst[i] = math<T>::store(math<T>::load(dst[i]) + w * math<T>::load(src[i]));
}
template <>
__global__ void axpy_kernel<double, double>(double* dst, const double* src, std::size_t n,
                                            double w) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    dst[i] += w * src[i];
}

template <class T, class Acc>
__global__ void scale_kernel(T* data, std::size_t n, Acc f) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    data[i] = math<T>::store(math<T>::load(data[i]) * f);
}
template <>
__global__ void scale_kernel<double, double>(double* data, std::size_t n, double f) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    data[i] *= f;
}

} // namespace

void batched_copy(const copy_job* jobs, std::size_t n_jobs, std::size_t max_bytes,
                  void* stream) {
  if (n_jobs == 0 || max_bytes == 0)
    return;
  auto s = static_cast<cudaStream_t>(stream);
  dim3 block(threads);
  auto x = static_cast<unsigned>(std::min<std::size_t>((max_bytes / 16 + threads) / threads, 1024));
  for (std::size_t first = 0; first < n_jobs; first += max_jobs_per_launch) {
    auto count = std::min(max_jobs_per_launch, n_jobs - first);
    dim3 grid(x, static_cast<unsigned>(count));
    batched_copy_kernel<<<grid, block, 0, s>>>(jobs + first);
    check(cudaGetLastError(), "batched copy launch");
  }
}

void axpy(void* dst, const void* src, std::size_t n, double weight, float_kind kind,
          void* stream) {
  if (n == 0)
    return;
  auto s = static_cast<cudaStream_t>(stream);
  auto w = static_cast<float>(weight);
  switch (kind) {
  case float_kind::f32:
    axpy_kernel<float, float><<<blocks_for(n), threads, 0, s>>>(
      static_cast<float*>(dst), static_cast<const float*>(src), n, w);
    break;
  case float_kind::f64:
    axpy_kernel<double, double><<<blocks_for(n), threads, 0, s>>>(
      static_cast<double*>(dst), static_cast<const double*>(src), n, weight);
    break;
  case float_kind::f16:
    axpy_kernel<__half, float><<<blocks_for(n), threads, 0, s>>>(
      static_cast<__half*>(dst), static_cast<const __half*>(src), n, w);
    break;
  case float_kind::bf16:
    axpy_kernel<__nv_bfloat16, float><<<blocks_for(n), threads, 0, s>>>(
      static_cast<__nv_bfloat16*>(dst), static_cast<const __nv_bfloat16*>(src), n, w);
    break;
  }
  check(cudaGetLastError(), "axpy launch");
}

void scale(void* data, std::size_t n, double factor, float_kind kind, void* stream) {
  if (n == 0)
    return;
  auto s = static_cast<cudaStream_t>(stream);
  auto f = static_cast<float>(factor);
  switch (kind) {
  case float_kind::f32:
    scale_kernel<float, float><<<blocks_for(n), threads, 0, s>>>(static_cast<float*>(data), n, f);
    break;
  case float_kind::f64:
    scale_kernel<double, double><<<blocks_for(n), threads, 0, s>>>(static_cast<double*>(data), n,
                                                                   factor);
    break;
  case float_kind::f16:
    scale_kernel<__half, float><<<blocks_for(n), threads, 0, s>>>(static_cast<__half*>(data), n, f);
    break;
  case float_kind::bf16:
    scale_kernel<__nv_bfloat16, float><<<blocks_for(n), threads, 0, s>>>(
      static_cast<__nv_bfloat16*>(data), n, f);
    break;
  }
  check(cudaGetLastError(), "scale launch");
}

} // namespace asteroid::kernels::cuda
