#pragma once
/// \file
/// Data-plane frames: a tensor_message on the runtime's own TCP connections
/// (actors/data_plane.hpp), outside CAF.
///
/// One frame, all integers little-endian:
///
///     offset  size  field
///     0       4     magic "ASTF"
///     4       1     u8 format version (4)
///     5       1     u8 kind (tensor_kind; 0 in an acknowledgement)
///     6       1     u8 frame type (0 tensor, 1 acknowledgement)
///     7       1     reserved, 0
///     8       8     u64 destination: actor id on the receiving node
///     16      8     i64 generation
///     24      8     i64 step
///     32      4     i32 micro-batch
///     36      4     i32 piece
///     40      4     i32 sender
///     44      4     u32 key byte count
///     48      8     u64 payload byte count
///     56      8     i64 job
///     64      8     u64 link: the sending connection's stream (0: none)
///     72      8     u64 sequence number within that link (0: none)
///     80      key bytes, then payload bytes
///
/// Sequence numbers let a link heal (actors/data_plane.hpp): the receiver
/// answers every sequenced tensor frame with an acknowledgement frame (no
/// key, no payload) naming the link and the highest sequence number it has
/// delivered; the sender keeps each frame until it is acknowledged, writes
/// the unacknowledged ones again on a new connection when the old one
/// broke, and the receiver drops those it already delivered.
///
/// The header is checked before anything is allocated: a peer can only ever
/// cause a wire_error, never an allocation beyond `frame_limits`.
#include "asteroid/serialization/tensor_message.hpp"
#include "asteroid/serialization/wire_error.hpp"

#include <array>
#include <cstddef>
#include <cstdint>

namespace asteroid::serialization {

inline constexpr std::size_t frame_header_size = 80;
inline constexpr std::uint8_t frame_version = 4;

/// What a frame carries: a tensor, or the receiver's word that it holds
/// every frame of a link up to a sequence number.
enum class frame_type : std::uint8_t { tensor = 0, acknowledgement = 1 };

/// The tensor's identity, where it goes and how many bytes follow.
struct frame_header : tensor_identity {
  frame_type type = frame_type::tensor;
  std::uint64_t destination = 0;
  std::uint32_t key_size = 0;
  std::uint64_t payload_size = 0;
  std::uint64_t link = 0;
  std::uint64_t sequence = 0;
};

/// Largest key and payload a receiver accepts.
struct frame_limits {
  std::uint32_t max_key = 4096;
  std::uint64_t max_payload = std::uint64_t{1} << 31;
};

/// The header of `m` sent to actor `destination` (sizes from `m`).
frame_header frame_header_of(const tensor_message& m, std::uint64_t destination);

/// The message a frame carries: `h`'s identity with `key` and `payload`.
tensor_message message_of(const frame_header& h, std::string key,
                          std::string payload);

/// The acknowledgement of every frame of `link` up to `sequence`.
frame_header acknowledgement_header(std::uint64_t link, std::uint64_t sequence);

std::array<char, frame_header_size> encode_frame_header(const frame_header& h);

/// Throws wire_error naming the first problem (magic, version, type, kind,
/// sizes).
frame_header decode_frame_header(const char* bytes, const frame_limits& limits = {});

} // namespace asteroid::serialization
