#pragma once

/// \file
/// Versioned training checkpoints.
///
/// File layout (version 1), integers little-endian:
///
///     0   4  magic "ASTC"
///     4   2  u16 format version (1)
///     6   2  u16 flags (0)
///     8   8  u64 body length
///     16  8  u64 checksum of the body
///     24  -  body: model_name, model_options_json, metadata (u64 length +
///            bytes each), step, epoch, data_position (i64), rng_state
///            (u64 length + bytes), model_state (tensor list, see
///            tensor_wire.hpp), optimizer kind (string), optimizer tensors
///            (tensor list), u32 hyper-parameter count, then per entry a
///            string name and an f64 value.

#include "asteroid/serialization/optimizer_state.hpp"
#include "asteroid/serialization/tensor_wire.hpp"

#include <cstdint>
#include <stdexcept>
#include <string>

namespace asteroid::serialization {

/// Current checkpoint format version; load_checkpoint() reads only this one.
inline constexpr std::uint16_t checkpoint_version = 1;

/// Everything needed to resume training exactly where it stopped.
struct checkpoint {
  named_tensors model_state;
  optimizer_state optimizer;
  std::int64_t step = 0;          ///< optimizer steps taken so far
  std::int64_t epoch = 0;         ///< current epoch (0-based)
  std::int64_t data_position = 0; ///< samples consumed in the current epoch
  std::string rng_state;          ///< bytes from capture_rng_state()
  std::string model_name;
  std::string model_options_json; ///< the model's options as a JSON document
  std::string metadata;           ///< free-form (who/when/why), not interpreted
};

/// Thrown by save_checkpoint() / load_checkpoint(); the message starts with
/// "checkpoint '<path>': " and names the problem.
class checkpoint_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// Writes `ckpt` to `path` atomically.
///
/// The bytes go to a temporary file in the same directory, which is fsync'ed
/// and then renamed over `path`: a crash at any point leaves either the old
/// or the new checkpoint, never a torn one.
void save_checkpoint(const std::string& path, const checkpoint& ckpt);

/// Reads a checkpoint; tensors come back as contiguous CPU tensors.
///
/// Throws checkpoint_error for a missing or unreadable file, truncation, bad
/// magic, an unsupported version or a checksum mismatch ("corrupted").
checkpoint load_checkpoint(const std::string& path);

/// Serializes a checkpoint to bytes (the exact file contents).
std::string encode_checkpoint(const checkpoint& ckpt);

/// Parses checkpoint bytes; errors name `source` (a path or other label).
checkpoint decode_checkpoint(std::string_view bytes, const std::string& source);

} // namespace asteroid::serialization
