#include "asteroid/kernels/wire_codec.hpp"

#include "asteroid/kernels/compute_device.hpp"

#ifdef ASTEROID_WITH_CUDA
#include "cuda_wire_codec.hpp"
#endif

#include <array>
#include <stdexcept>
#include <utility>

namespace asteroid::kernels {

namespace {

constexpr std::array<std::pair<wire_codec, const char*>, 5> names{{
  {wire_codec::none, "none"},
  {wire_codec::fp16, "fp16"},
  {wire_codec::bf16, "bf16"},
  {wire_codec::int8, "int8"},
  {wire_codec::int8_channel, "int8-channel"},
}};

torch::Dtype value_dtype(wire_codec c) {
  switch (c) {
    case wire_codec::none: return torch::kFloat32;
    case wire_codec::fp16: return torch::kFloat16;
    case wire_codec::bf16: return torch::kBFloat16;
    case wire_codec::int8:
    case wire_codec::int8_channel: return torch::kInt8;
  }
  return torch::kFloat32;
}

bool is_int8(wire_codec c) {
  return c == wire_codec::int8 || c == wire_codec::int8_channel;
}

/// The scales' shape broadcast against the values: [1, C, 1, ...].
std::vector<int64_t> channel_view(const torch::Tensor& values) {
  std::vector<int64_t> shape(static_cast<size_t>(values.dim()), 1);
  shape[1] = values.size(1);
  return shape;
}

} // namespace

std::string to_string(wire_codec c) {
  for (const auto& [codec, name] : names)
    if (codec == c)
      return name;
  return "unknown";
}

std::vector<std::string> wire_codec_names() {
  std::vector<std::string> out;
  for (const auto& [codec, name] : names)
    out.emplace_back(name);
  return out;
}

wire_codec parse_wire_codec(const std::string& text) {
  std::string known;
  for (const auto& [codec, name] : names) {
    if (text == name)
      return codec;
    known += (known.empty() ? "" : ", ") + std::string(name);
  }
  throw std::invalid_argument("unknown wire codec '" + text + "' (known: " + known + ")");
}

double wire_ratio(wire_codec c) {
  switch (c) {
    case wire_codec::none: return 1.0;
    case wire_codec::fp16:
    case wire_codec::bf16: return 0.5;
    case wire_codec::int8:
    case wire_codec::int8_channel: return 0.25;
  }
  return 1.0;
}

encoded_tensor encode(const torch::Tensor& x, wire_codec c) {
  if (!x.defined() || !torch::isFloatingType(x.scalar_type()))
    throw std::invalid_argument("wire codec " + to_string(c)
                                + ": can only encode a floating tensor");
  torch::NoGradGuard no_grad;
#ifdef ASTEROID_WITH_CUDA
  if (x.is_cuda() && c != wire_codec::none)
    return detail::cuda_encode(x, c);
#endif
  encoded_tensor e;
  if (!is_int8(c)) {
    e.values = x.to(value_dtype(c)).contiguous();
    return e;
  }
  auto f = x.to(torch::kFloat32);
  torch::Tensor amax;
  if (c == wire_codec::int8_channel && f.dim() >= 2) {
    std::vector<int64_t> others;
    for (int64_t d = 0; d < f.dim(); ++d)
      if (d != 1)
        others.push_back(d);
    amax = f.abs().amax(others);
  } else {
    amax = f.abs().max().reshape({1});
  }
  // An all-zero channel keeps scale 1: its values encode as zeros either way.
  e.scale = torch::where(amax > 0, amax / 127.0, torch::ones_like(amax)).contiguous();
  auto s = e.scale.numel() == 1 ? e.scale : e.scale.view(channel_view(f));
  e.values = (f / s).round().clamp(-127, 127).to(torch::kInt8).contiguous();
  return e;
}

void check_encoded(const encoded_tensor& e, wire_codec c) {
  if (!e.values.defined() || e.values.scalar_type() != value_dtype(c))
    throw std::invalid_argument(
      "wire codec " + to_string(c) + ": values of dtype "
      + (e.values.defined() ? std::string(c10::toString(e.values.scalar_type()))
                            : std::string("undefined"))
      + ", expected " + c10::toString(value_dtype(c)));
  if (!is_int8(c))
    return;
  if (!e.scale.defined() || e.scale.scalar_type() != torch::kFloat32 || e.scale.dim() != 1)
    throw std::invalid_argument("wire codec " + to_string(c)
                                + ": needs a 1-D float32 scale");
  if (e.scale.numel() == 1)
    return;
  if (c != wire_codec::int8_channel || e.values.dim() < 2
      || e.scale.numel() != e.values.size(1))
    throw std::invalid_argument("wire codec " + to_string(c) + ": "
                                + std::to_string(e.scale.numel())
                                + " scales do not fit values of shape "
                                + c10::str(e.values.sizes()));
}

torch::Tensor decode(const encoded_tensor& e, wire_codec c) {
  check_encoded(e, c);
  torch::NoGradGuard no_grad;
#ifdef ASTEROID_WITH_CUDA
  if (e.values.is_cuda() && c != wire_codec::none)
    return detail::cuda_decode(e, c);
#endif
  if (!is_int8(c))
    return e.values.to(torch::kFloat32);
  auto values = e.values.to(torch::kFloat32);
  auto scale = e.scale.to(values.device());
  if (scale.numel() == 1)
    return values * scale;
  return values * scale.view(channel_view(values));
}

encoded_tensor to_device(const encoded_tensor& e, torch::Device d) {
  return {to_compute_device(e.values, d), to_compute_device(e.scale, d)};
}

encoded_tensor error_feedback::encode(int64_t key, const torch::Tensor& x) {
  torch::NoGradGuard no_grad;
  auto it = residual_.find(key);
  auto corrected = x.to(torch::kFloat32);
  if (it != residual_.end() && it->second.sizes() == corrected.sizes())
    corrected = corrected + it->second;
  auto e = kernels::encode(corrected, codec_);
  residual_[key] = corrected - kernels::decode(e, codec_);
  return e;
}

} // namespace asteroid::kernels
