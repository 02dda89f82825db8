#include "asteroid/serialization/frame.hpp"

#include <cstring>
#include <string>

namespace asteroid::serialization {

namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "data-plane frames store host-order (little-endian) values");

constexpr char magic[4] = {'A', 'S', 'T', 'F'};

template <class T>
void put(char* out, std::size_t at, T v) {
  std::memcpy(out + at, &v, sizeof v);
}

template <class T>
T get(const char* in, std::size_t at) {
  T v;
  std::memcpy(&v, in + at, sizeof v);
  return v;
}

} // namespace

frame_header frame_header_of(const tensor_message& m, std::uint64_t destination) {
  frame_header h;
  static_cast<tensor_identity&>(h) = m;
  h.destination = destination;
  h.key_size = static_cast<std::uint32_t>(m.key.size());
  h.payload_size = m.payload.size();
  return h;
}

tensor_message message_of(const frame_header& h, std::string key,
                          std::string payload) {
  tensor_message m;
  static_cast<tensor_identity&>(m) = h;
  m.key = std::move(key);
  m.payload = std::move(payload);
  return m;
}

frame_header acknowledgement_header(std::uint64_t link, std::uint64_t sequence) {
  frame_header h;
  h.type = frame_type::acknowledgement;
  h.link = link;
  h.sequence = sequence;
  return h;
}

std::array<char, frame_header_size> encode_frame_header(const frame_header& h) {
  std::array<char, frame_header_size> out{};
  std::memcpy(out.data(), magic, 4);
  put(out.data(), 4, frame_version);
  const bool ack = h.type == frame_type::acknowledgement;
  put(out.data(), 5, ack ? std::uint8_t{0} : static_cast<std::uint8_t>(h.kind));
  put(out.data(), 6, static_cast<std::uint8_t>(h.type));
  put(out.data(), 8, h.destination);
  put(out.data(), 16, h.generation);
  put(out.data(), 24, h.step);
  put(out.data(), 32, h.micro_batch);
  put(out.data(), 36, h.piece);
  put(out.data(), 40, h.sender);
  put(out.data(), 44, h.key_size);
  put(out.data(), 48, h.payload_size);
  put(out.data(), 56, h.job);
  put(out.data(), 64, h.link);
  put(out.data(), 72, h.sequence);
  return out;
}

frame_header decode_frame_header(const char* in, const frame_limits& limits) {
  if (std::memcmp(in, magic, 4) != 0)
    throw wire_error("data-plane frame: bad magic (not an Asteroid frame)");
  auto version = get<std::uint8_t>(in, 4);
  if (version != frame_version)
    throw wire_error("data-plane frame: unsupported version "
                     + std::to_string(version));
  auto type = get<std::uint8_t>(in, 6);
  if (type > static_cast<std::uint8_t>(frame_type::acknowledgement))
    throw wire_error("data-plane frame: unknown frame type " + std::to_string(type));
  auto kind = get<std::uint8_t>(in, 5);
  frame_header h;
  h.type = static_cast<frame_type>(type);
  if (h.type == frame_type::tensor) {
    if (!is_tensor_kind(kind))
      throw wire_error("data-plane frame: unknown kind " + std::to_string(kind));
    h.kind = static_cast<tensor_kind>(kind);
  }
  h.destination = get<std::uint64_t>(in, 8);
  h.generation = get<std::int64_t>(in, 16);
  h.step = get<std::int64_t>(in, 24);
  h.micro_batch = get<std::int32_t>(in, 32);
  h.piece = get<std::int32_t>(in, 36);
  h.sender = get<std::int32_t>(in, 40);
  h.key_size = get<std::uint32_t>(in, 44);
  h.payload_size = get<std::uint64_t>(in, 48);
  h.job = get<std::int64_t>(in, 56);
  h.link = get<std::uint64_t>(in, 64);
  h.sequence = get<std::uint64_t>(in, 72);
  if (h.type == frame_type::acknowledgement
      && (kind != 0 || h.key_size != 0 || h.payload_size != 0))
    throw wire_error("data-plane frame: an acknowledgement with a kind, key "
                     "or payload");
  if (h.key_size > limits.max_key)
    throw wire_error("data-plane frame: key of " + std::to_string(h.key_size)
                     + " bytes exceeds the limit of "
                     + std::to_string(limits.max_key));
  if (h.payload_size > limits.max_payload)
    throw wire_error("data-plane frame: payload of "
                     + std::to_string(h.payload_size)
                     + " bytes exceeds the limit of "
                     + std::to_string(limits.max_payload));
  return h;
}

} // namespace asteroid::serialization
