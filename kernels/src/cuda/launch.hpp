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

// The wire codecs (wire_codec_kernels.cu). Element i of a tensor viewed as
// [outer, channels, inner] belongs to channel (i / inner) % channels; a
// per-tensor scale is channels = 1, inner = n.

/// to[i] = from[i] rounded to nearest even; `to` is f16 or bf16.
void narrow_from_float(const float* from, void* to, std::size_t n, float_kind to_kind,
                       void* stream);

/// to[i] = from[i]; `from` is f16 or bf16.
void widen_to_float(const void* from, float* to, std::size_t n, float_kind from_kind,
                    void* stream);

/// scale[c] = max |x| of channel c / 127, or 1 where that is 0, for c <
/// channels. `scale` needs no initial value.
void int8_scales(const float* x, std::size_t n, std::size_t channels, std::size_t inner,
                 float* scale, void* stream);

/// q[i] = clamp(round-half-even(x[i] / scale[c]), -127, 127).
void int8_quantize(const float* x, const float* scale, std::size_t n, std::size_t channels,
                   std::size_t inner, signed char* q, void* stream);

/// x[i] = q[i] * scale[c].
void int8_dequantize(const signed char* q, const float* scale, std::size_t n,
                     std::size_t channels, std::size_t inner, float* x, void* stream);

} // namespace asteroid::kernels::cuda
