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

std::array<char, frame_header_size> encode_frame_header(const frame_header& h) {
  std::array<char, frame_header_size> out{};
  std::memcpy(out.data(), magic, 4);
  put(out.data(), 4, frame_version);
  put(out.data(), 5, static_cast<std::uint8_t>(h.kind));
  put(out.data(), 8, h.destination);
  put(out.data(), 16, h.step);
  put(out.data(), 24, h.a);
  put(out.data(), 28, h.b);
  put(out.data(), 32, h.key_size);
  put(out.data(), 36, h.payload_size);
  return out;
}

frame_header decode_frame_header(const char* in, const frame_limits& limits) {
  if (std::memcmp(in, magic, 4) != 0)
    throw wire_error("data-plane frame: bad magic (not an Asteroid frame)");
  auto version = get<std::uint8_t>(in, 4);
  if (version != frame_version)
    throw wire_error("data-plane frame: unsupported version "
                     + std::to_string(version));
  auto kind = get<std::uint8_t>(in, 5);
  if (kind < static_cast<std::uint8_t>(frame_kind::activation)
      || kind > static_cast<std::uint8_t>(frame_kind::echo_reply))
    throw wire_error("data-plane frame: unknown kind " + std::to_string(kind));
  frame_header h;
  h.kind = static_cast<frame_kind>(kind);
  h.destination = get<std::uint64_t>(in, 8);
  h.step = get<std::int64_t>(in, 16);
  h.a = get<std::int32_t>(in, 24);
  h.b = get<std::int32_t>(in, 28);
  h.key_size = get<std::uint32_t>(in, 32);
  h.payload_size = get<std::uint64_t>(in, 36);
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
