#pragma once

/// \file
/// Compression of the tensors that cross links: activations as fp16, bf16 or
/// int8 (one scale per tensor or per channel), gradients as fp16 or bf16,
/// optionally with error feedback. `none` keeps float32 and is bit-exact.

#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace asteroid::kernels {

enum class wire_codec {
  none,
  fp16,
  bf16,
  /// Symmetric int8 with one float32 scale for the whole tensor.
  int8,
  /// Symmetric int8 with one float32 scale per channel (dimension 1; a 1-D
  /// tensor gets one scale).
  int8_channel,
};

/// "none", "fp16", "bf16", "int8", "int8-channel".
std::string to_string(wire_codec c);
/// The codec of a name; throws std::invalid_argument naming the text and the
/// known names.
wire_codec parse_wire_codec(const std::string& name);
/// The codec names, in declaration order.
std::vector<std::string> wire_codec_names();

/// Bytes on the wire per float32 byte, scales aside: 1, 0.5, 0.5, 0.25, 0.25.
double wire_ratio(wire_codec c);

/// A tensor as it crosses a link: `values` in the codec's dtype and, for
/// the int8 codecs, `scale` (float32: one element, or one per channel).
struct encoded_tensor {
  torch::Tensor values;
  torch::Tensor scale;
};

/// Encodes a floating tensor, on the tensor's device: a CUDA tensor through
/// the project's CUDA kernels where the build has them (the same bytes as
/// the CPU path), so that only the encoded bytes cross to the host. Throws
/// std::invalid_argument for a tensor that is not floating.
encoded_tensor encode(const torch::Tensor& x, wire_codec c);

/// Throws std::invalid_argument when `e` does not have the codec's dtypes,
/// or its scales do not fit its values (one, or one per channel of
/// dimension 1 for int8-channel).
void check_encoded(const encoded_tensor& e, wire_codec c);

/// The float32 tensor an encoded one stands for, on the values' device
/// (CUDA values through the project's kernels). Throws as check_encoded.
torch::Tensor decode(const encoded_tensor& e, wire_codec c);

/// `e` moved to device `d` (a host tensor through pinned memory): received
/// bytes cross to a GPU encoded, before they are decoded there.
encoded_tensor to_device(const encoded_tensor& e, torch::Device d);

/// Error feedback (Seide et al. 2014; Karimireddy et al. 2019): what the
/// codec lost on a tensor is added to the next tensor sent under the same
/// key, so that the errors do not accumulate over steps.
class error_feedback {
public:
  explicit error_feedback(wire_codec c) : codec_(c) {}

  /// Encodes `x` plus the residual kept for `key`, and keeps the new
  /// residual (what the encoding lost). A residual of another shape (the
  /// key's tensors changed, e.g. after a re-plan) is dropped.
  encoded_tensor encode(int64_t key, const torch::Tensor& x);

  /// Residuals kept (for tests and reports).
  size_t size() const { return residual_.size(); }

private:
  wire_codec codec_;
  std::map<int64_t, torch::Tensor> residual_;
};

} // namespace asteroid::kernels
