// Torch-facing glue for the wire codec kernels; compiled only with
// ASTEROID_WITH_CUDA.

#include "cuda_wire_codec.hpp"

#include "cuda/launch.hpp"
#include "cuda_ops.hpp"

#include <c10/cuda/CUDAGuard.h>

#include <stdexcept>

namespace asteroid::kernels::detail {

namespace {

cuda::float_kind narrow_kind(wire_codec c) {
  return c == wire_codec::fp16 ? cuda::float_kind::f16 : cuda::float_kind::bf16;
}

/// How the int8 codecs see a tensor: `channels` of `inner` elements, as the
/// CPU path's scales run over dimension 1 (one scale when per tensor or 1-D).
struct channel_layout {
  std::size_t channels = 1;
  std::size_t inner = 1;
};

channel_layout layout_of(const torch::Tensor& t, wire_codec c, int64_t scales) {
  channel_layout l;
  l.inner = static_cast<std::size_t>(t.numel());
  if (c == wire_codec::int8_channel && t.dim() >= 2 && scales != 1) {
    l.channels = static_cast<std::size_t>(t.size(1));
    l.inner = 1;
    for (int64_t d = 2; d < t.dim(); ++d)
      l.inner *= static_cast<std::size_t>(t.size(d));
  }
  return l;
}

} // namespace

encoded_tensor cuda_encode(const torch::Tensor& x, wire_codec c) {
  c10::cuda::CUDAGuard guard(x.device());
  auto f = x.to(torch::kFloat32).contiguous();
  auto n = static_cast<std::size_t>(f.numel());
  void* stream = current_stream(f.device());
  encoded_tensor e;
  if (c == wire_codec::fp16 || c == wire_codec::bf16) {
    e.values = torch::empty(f.sizes(), f.options().dtype(c == wire_codec::fp16
                                                           ? torch::kFloat16
                                                           : torch::kBFloat16));
    cuda::narrow_from_float(f.data_ptr<float>(), e.values.data_ptr(), n, narrow_kind(c), stream);
    return e;
  }
  // int8: a per-channel codec keeps one scale per channel of dimension 1.
  const int64_t scales = c == wire_codec::int8_channel && f.dim() >= 2 ? f.size(1) : 1;
  auto l = layout_of(f, c, scales);
  e.scale = torch::empty({scales}, f.options());
  cuda::int8_scales(f.data_ptr<float>(), n, l.channels, l.inner, e.scale.data_ptr<float>(),
                    stream);
  e.values = torch::empty(f.sizes(), f.options().dtype(torch::kInt8));
  cuda::int8_quantize(f.data_ptr<float>(), e.scale.data_ptr<float>(), n, l.channels, l.inner,
                      static_cast<signed char*>(e.values.data_ptr()), stream);
  return e;
}

torch::Tensor cuda_decode(const encoded_tensor& e, wire_codec c) {
  c10::cuda::CUDAGuard guard(e.values.device());
  auto values = e.values.contiguous();
  auto n = static_cast<std::size_t>(values.numel());
  void* stream = current_stream(values.device());
  auto out = torch::empty(values.sizes(), values.options().dtype(torch::kFloat32));
  if (c == wire_codec::fp16 || c == wire_codec::bf16) {
    cuda::widen_to_float(values.data_ptr(), out.data_ptr<float>(), n, narrow_kind(c), stream);
    return out;
  }
  auto scale = e.scale.to(values.device()).contiguous();
  auto l = layout_of(values, c, scale.numel());
  cuda::int8_dequantize(static_cast<const signed char*>(values.data_ptr()),
                        scale.data_ptr<float>(), n, l.channels, l.inner, out.data_ptr<float>(),
                        stream);
  return out;
}

} // namespace asteroid::kernels::detail
