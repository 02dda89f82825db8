#pragma once
/// \file
/// Data-plane frames: how tensor bytes travel between node processes on the
/// runtime's own TCP connections (actors/data_plane.hpp), outside CAF.
///
/// One frame, all integers little-endian:
///
///     offset  size  field
///     0       4     magic "ASTF"
///     4       1     u8 format version (1)
///     5       1     u8 kind (frame_kind)
///     6       2     reserved, 0
///     8       8     u64 destination: actor id on the receiving node
///     16      8     i64 step
///     24      4     i32 a (micro-batch or chunk index)
///     28      4     i32 b (sending replica)
///     32      4     u32 key byte count
///     36      8     u64 payload byte count
///     44      key bytes, then payload bytes
///
/// The header is checked before anything is allocated: a peer can only ever
/// cause a wire_error, never an allocation beyond `frame_limits`.
#include "asteroid/serialization/wire_error.hpp"

#include <array>
#include <cstddef>
#include <cstdint>

namespace asteroid::serialization {

/// What a frame carries; decides the message the receiver delivers.
enum class frame_kind : std::uint8_t {
  activation = 1, ///< (ast_act, step, a=micro-batch, b=from, payload)
  gradient = 2,   ///< (ast_grad, step, a=micro-batch, b=from, payload)
  all_reduce = 3, ///< (ast_ar, step, a=chunk, payload)
  snapshot = 4,   ///< (ast_snap, key, step=version, payload)
  echo = 5,       ///< link probe: answer with echo_reply to key=endpoint, step=actor
  echo_reply = 6, ///< link probe answer: (ast_echo, payload size)
};

inline constexpr std::size_t frame_header_size = 44;
inline constexpr std::uint8_t frame_version = 1;

struct frame_header {
  frame_kind kind = frame_kind::activation;
  std::uint64_t destination = 0;
  std::int64_t step = 0;
  std::int32_t a = 0;
  std::int32_t b = 0;
  std::uint32_t key_size = 0;
  std::uint64_t payload_size = 0;
};

/// Largest key and payload a receiver accepts.
struct frame_limits {
  std::uint32_t max_key = 4096;
  std::uint64_t max_payload = std::uint64_t{1} << 31;
};

std::array<char, frame_header_size> encode_frame_header(const frame_header& h);

/// Throws wire_error naming the first problem (magic, version, kind, sizes).
frame_header decode_frame_header(const char* bytes, const frame_limits& limits = {});

} // namespace asteroid::serialization
