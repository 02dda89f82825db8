#pragma once
/// \file
/// Compression of the activations and gradients that cross links between
/// stages (kernels/wire_codec.hpp): chosen per job and, by their rate, per
/// link; carried in every replica spec, applied by the sending replica and
/// undone by the receiving one.
#include "asteroid/kernels/wire_codec.hpp"

#include <torch/torch.h>

#include <cstdint>
#include <string>

namespace asteroid::actors {

/// A job's choice (job file: "compression": {"activations": "fp16",
/// "gradients": "bf16", "error_feedback": true, "all_reduce": "fp16",
/// "below_mbps": 200}).
struct wire_compression {
  /// none, fp16, bf16, int8 or int8-channel.
  std::string activations = "none";
  /// none, fp16 or bf16.
  std::string gradients = "none";
  /// Gradients: what the codec lost on a micro-batch's gradient to a peer is
  /// added to the same micro-batch's gradient to that peer in the next step.
  bool error_feedback = false;
  /// none, fp16 or bf16: the chunks of a stage's ring all-reduce. Every
  /// replica of the stage ends with the same gradient (the owner of each
  /// reduced chunk rounds it as its peers receive it), not the exact sum.
  std::string all_reduce = "none";
  /// Compress only the links slower than this many Mbit/s (measured when
  /// the job measures its links, else taken as 1 Gbit/s); faster links,
  /// and a device's links to itself, carry float32. 0: every link. A link
  /// is compressed both ways when either way is slow, and a stage's ring
  /// as a whole when any two of its members are joined by a slow link.
  double below_mbps = 0.0;
};

/// Throws std::invalid_argument naming the field ("activations",
/// "gradients", "error_feedback", "all_reduce") and what is wrong with it.
void check_wire_compression(const std::string& activations,
                            const std::string& gradients, bool error_feedback,
                            const std::string& all_reduce = "none");

/// The bytes that carry `t` under `codec` (a tensor record, or for the int8
/// codecs a named pair "values", "scale"); `none` is exactly
/// serialization::encode_tensor. With `feedback`, `key` names the residual.
std::string encode_wire_payload(const torch::Tensor& t, kernels::wire_codec codec,
                                kernels::error_feedback* feedback = nullptr,
                                int64_t key = 0);

/// The encoded tensor the bytes carry, checked against the codec (under
/// `none`: the tensor as sent, in `values`). Throws
/// (serialization::wire_error or std::invalid_argument) naming what is
/// malformed. A receiver that computes on a GPU moves this to it and
/// decodes there (kernels::to_device, kernels::decode).
kernels::encoded_tensor read_wire_payload(const std::string& bytes, kernels::wire_codec codec);

/// What read_wire_payload returned, on `device`: under `none` the tensor
/// as sent; otherwise the encoded tensor crosses to `device` as it came
/// (fewer bytes) and is decoded there, on a GPU by the project's kernels.
torch::Tensor decode_on(const kernels::encoded_tensor& received, kernels::wire_codec codec,
                        torch::Device device);

/// The float32 tensor the bytes carry (under `none`: the tensor as sent),
/// on the host. Throws as read_wire_payload.
torch::Tensor decode_wire_payload(const std::string& bytes, kernels::wire_codec codec);

} // namespace asteroid::actors
