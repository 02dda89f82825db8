// CUDA kernels behind the wire codecs (see launch.hpp and wire_codec.hpp).
// They compute what the CPU path computes with ATen, in the same float
// operations, so a tensor encodes to the same bytes on either device.

#include "common.cuh"
#include "launch.hpp"

#include <cstdint>

namespace asteroid::kernels::cuda {

namespace {

using detail::blocks_for;
using detail::check;
using detail::math;
using detail::threads;

// Grid y is limited to 65535; more channels are reduced in slices.
constexpr std::size_t max_channels_per_launch = 65535;

__device__ std::size_t channel_of(std::size_t i, std::size_t channels, std::size_t inner) {
  return channels == 1 ? 0 : (i / inner) % channels;
}

template <class T>
__global__ void narrow_kernel(const float* from, T* to, std::size_t n) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    to[i] = math<T>::store(from[i]);
}

template <class T>
__global__ void widen_kernel(const T* from, float* to, std::size_t n) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    to[i] = math<T>::load(from[i]);
}

// Non-negative floats order as their bit patterns do, so the maximum of
// |x| is an unsigned maximum: a block reduces its share in shared memory
// and merges it with one atomicMax. Row y of the grid is channel
// `first + y`, whose elements are the `outer` runs of `inner` values.
__global__ void abs_max_kernel(const float* x, std::size_t outer, std::size_t channels,
                               std::size_t inner, std::size_t first, unsigned* amax_bits) {
  __shared__ unsigned best[detail::threads];
  const std::size_t c = first + blockIdx.y;
  const std::size_t per_channel = outer * inner;
  unsigned m = 0;
  for (std::size_t k = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
       k < per_channel; k += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const std::size_t o = k / inner;
    const std::size_t j = k - o * inner;
    m = max(m, __float_as_uint(fabsf(x[(o * channels + c) * inner + j])));
  }
  best[threadIdx.x] = m;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half)
      best[threadIdx.x] = max(best[threadIdx.x], best[threadIdx.x + half]);
    __syncthreads();
  }
  if (threadIdx.x == 0)
    atomicMax(&amax_bits[c], best[0]);
}

// In place: the maximum's bits become the scale, as the CPU path's
// where(amax > 0, amax / 127, 1).
__global__ void finish_scales_kernel(float* scale, std::size_t channels) {
  for (std::size_t c = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
       c < channels; c += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const float amax = __uint_as_float(reinterpret_cast<const unsigned*>(scale)[c]);
    scale[c] = amax > 0.0f ? amax / 127.0f : 1.0f;
  }
}

__global__ void quantize_kernel(const float* x, const float* scale, std::size_t n,
                                std::size_t channels, std::size_t inner, signed char* q) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const float r = rintf(x[i] / scale[channel_of(i, channels, inner)]);
    q[i] = static_cast<signed char>(fminf(fmaxf(r, -127.0f), 127.0f));
  }
}

__global__ void dequantize_kernel(const signed char* q, const float* scale, std::size_t n,
                                  std::size_t channels, std::size_t inner, float* x) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    x[i] = static_cast<float>(q[i]) * scale[channel_of(i, channels, inner)];
}

} // namespace

void narrow_from_float(const float* from, void* to, std::size_t n, float_kind to_kind,
                       void* stream) {
  if (n == 0)
    return;
  auto s = static_cast<cudaStream_t>(stream);
  switch (to_kind) {
  case float_kind::f16:
    narrow_kernel<<<blocks_for(n), threads, 0, s>>>(from, static_cast<__half*>(to), n);
    break;
  case float_kind::bf16:
    narrow_kernel<<<blocks_for(n), threads, 0, s>>>(from, static_cast<__nv_bfloat16*>(to), n);
    break;
  default: throw std::invalid_argument("narrow_from_float: the target is fp16 or bf16");
  }
  check(cudaGetLastError(), "narrow launch");
}

void widen_to_float(const void* from, float* to, std::size_t n, float_kind from_kind,
                    void* stream) {
  if (n == 0)
    return;
  auto s = static_cast<cudaStream_t>(stream);
  switch (from_kind) {
  case float_kind::f16:
    widen_kernel<<<blocks_for(n), threads, 0, s>>>(static_cast<const __half*>(from), to, n);
    break;
  case float_kind::bf16:
    widen_kernel<<<blocks_for(n), threads, 0, s>>>(static_cast<const __nv_bfloat16*>(from), to,
                                                   n);
    break;
  default: throw std::invalid_argument("widen_to_float: the source is fp16 or bf16");
  }
  check(cudaGetLastError(), "widen launch");
}

void int8_scales(const float* x, std::size_t n, std::size_t channels, std::size_t inner,
                 float* scale, void* stream) {
  if (channels == 0)
    return;
  auto s = static_cast<cudaStream_t>(stream);
  check(cudaMemsetAsync(scale, 0, channels * sizeof(float), s), "scale reset");
  const std::size_t per_channel = n / channels;
  if (per_channel > 0) {
    // Enough blocks per channel to keep the GPU busy on a few large
    // channels, one per channel when there are many.
    const auto x_blocks = static_cast<unsigned>(std::max<std::size_t>(
      1, std::min<std::size_t>((per_channel + threads - 1) / threads,
                               std::max<std::size_t>(1, 4096 / channels))));
    const std::size_t outer = per_channel / inner;
    for (std::size_t first = 0; first < channels; first += max_channels_per_launch) {
      const auto rows = std::min(max_channels_per_launch, channels - first);
      dim3 grid(x_blocks, static_cast<unsigned>(rows));
      abs_max_kernel<<<grid, threads, 0, s>>>(x, outer, channels, inner, first,
                                              reinterpret_cast<unsigned*>(scale));
      check(cudaGetLastError(), "abs max launch");
    }
  }
  finish_scales_kernel<<<blocks_for(channels), threads, 0, s>>>(scale, channels);
  check(cudaGetLastError(), "scale launch");
}

void int8_quantize(const float* x, const float* scale, std::size_t n, std::size_t channels,
                   std::size_t inner, signed char* q, void* stream) {
  if (n == 0)
    return;
  quantize_kernel<<<blocks_for(n), threads, 0, static_cast<cudaStream_t>(stream)>>>(
    x, scale, n, channels, inner, q);
  check(cudaGetLastError(), "quantize launch");
}

void int8_dequantize(const signed char* q, const float* scale, std::size_t n,
                     std::size_t channels, std::size_t inner, float* x, void* stream) {
  if (n == 0)
    return;
  dequantize_kernel<<<blocks_for(n), threads, 0, static_cast<cudaStream_t>(stream)>>>(
    q, scale, n, channels, inner, x);
  check(cudaGetLastError(), "dequantize launch");
}

} // namespace asteroid::kernels::cuda
