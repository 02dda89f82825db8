#include "asteroid/actors/wire_compression.hpp"

#include "asteroid/kernels/compute_device.hpp"
#include "asteroid/serialization/tensor_wire.hpp"

#include <stdexcept>

namespace asteroid::actors {

using kernels::wire_codec;

namespace {

/// The codec `name` names, for a field that takes none, fp16 or bf16.
wire_codec float_codec(const std::string& field, const std::string& name) {
  wire_codec c;
  try {
    c = kernels::parse_wire_codec(name);
  } catch (const std::exception& e) {
    throw std::invalid_argument(field + ": " + e.what());
  }
  if (c == wire_codec::int8 || c == wire_codec::int8_channel)
    throw std::invalid_argument(field + ": '" + name
                                + "' is for activations only; " + field
                                + " take none, fp16 or bf16");
  return c;
}

} // namespace

void check_wire_compression(const std::string& activations,
                            const std::string& gradients, bool error_feedback,
                            const std::string& all_reduce) {
  try {
    kernels::parse_wire_codec(activations);
  } catch (const std::exception& e) {
    throw std::invalid_argument(std::string("activations: ") + e.what());
  }
  const auto g = float_codec("gradients", gradients);
  float_codec("all_reduce", all_reduce);
  if (error_feedback && g == wire_codec::none)
    throw std::invalid_argument(
      "error_feedback: needs a gradients codec (fp16 or bf16) to correct");
}

std::string encode_wire_payload(const torch::Tensor& t, wire_codec codec,
                                kernels::error_feedback* feedback, int64_t key) {
  if (codec == wire_codec::none)
    return serialization::encode_tensor(t);
  auto e = feedback ? feedback->encode(key, t) : kernels::encode(t, codec);
  if (!e.scale.defined())
    return serialization::encode_tensor(e.values);
  return serialization::encode_tensors({{"values", e.values}, {"scale", e.scale}});
}

kernels::encoded_tensor read_wire_payload(const std::string& bytes, wire_codec codec) {
  kernels::encoded_tensor e;
  if (codec == wire_codec::int8 || codec == wire_codec::int8_channel) {
    auto parts = serialization::decode_tensors(bytes);
    if (parts.size() != 2 || parts[0].first != "values" || parts[1].first != "scale")
      throw std::invalid_argument("an " + kernels::to_string(codec)
                                  + " payload holds \"values\" and \"scale\"");
    e.values = parts[0].second;
    e.scale = parts[1].second;
  } else {
    e.values = serialization::decode_tensor(bytes);
  }
  if (codec != wire_codec::none)
    kernels::check_encoded(e, codec);
  return e;
}

torch::Tensor decode_on(const kernels::encoded_tensor& received, wire_codec codec,
                        torch::Device device) {
  return codec == wire_codec::none
           ? kernels::to_compute_device(received.values, device)
           : kernels::decode(kernels::to_device(received, device), codec);
}

torch::Tensor decode_wire_payload(const std::string& bytes, wire_codec codec) {
  return decode_on(read_wire_payload(bytes, codec), codec, torch::kCPU);
}

} // namespace asteroid::actors
