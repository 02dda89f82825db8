#pragma once
/// \file
/// The one identity every tensor of the runtime travels with: between actors
/// of one process, in CAF messages between processes, and in data-plane
/// frames (frame.hpp). Whatever carries it, a receiver sees the same fields,
/// so there is one place that says which step, micro-batch and sender a
/// tensor belongs to.
#include <cstdint>
#include <string>

namespace asteroid::serialization {

/// What a tensor is. The values are the frame's kind byte: append only.
enum class tensor_kind : std::uint8_t {
  activation = 1, ///< a stage's output rows for the next stage
  gradient = 2,   ///< the gradient of those rows, back to the stage before
  all_reduce = 3, ///< a chunk of a group's gradient ring all-reduce
  snapshot = 4,   ///< a stage state (stage_state) kept by another node
  echo = 5,       ///< link probe: answer with echo_reply to actor `step` (0: no answer)
  echo_reply = 6, ///< link probe answer
  input = 7,      ///< the first stage's inputs of one micro-batch
  label = 8,      ///< the last stage's targets of one micro-batch
};

inline constexpr std::uint8_t max_tensor_kind = 8;

/// The `step` of an echo that wants no echo_reply: a probe stream's filler
/// (no actor has id 0).
inline constexpr std::int64_t echo_without_reply = 0;

/// True for a byte that names a tensor_kind.
inline bool is_tensor_kind(std::uint8_t k) {
  return k >= 1 && k <= max_tensor_kind;
}

/// "activation", "gradient", ...; "kind N" for a byte that names none.
std::string to_string(tensor_kind k);

/// Which tensor it is: the fields a frame header carries too (frame.hpp).
struct tensor_identity {
  tensor_kind kind = tensor_kind::activation;
  /// The job it belongs to (0: none, e.g. a probe between idle nodes): a
  /// node serves one job at a time and drops every tensor of another.
  std::int64_t job = 0;
  /// The deployment of the job it belongs to: a receiver drops tensors of
  /// another one (what a replaced replica sent before it stopped).
  std::int64_t generation = 0;
  /// Training step; a snapshot's version; a probe's reply address (actor id;
  /// 0: a stream's filler, not answered) or echoed size.
  std::int64_t step = 0;
  std::int32_t micro_batch = 0;
  /// Which part of a split tensor: the all-reduce chunk index.
  std::int32_t piece = 0;
  /// The sending replica's index in its group (-1: not a replica).
  std::int32_t sender = -1;
};

struct tensor_message : tensor_identity {
  /// A snapshot's range key ("L0-3"), an echo's reply endpoint.
  std::string key;
  /// Encoded tensor(s) (tensor_wire.hpp), or probe filler.
  std::string payload;
};

} // namespace asteroid::serialization
