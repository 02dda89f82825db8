#pragma once

// Internal to asteroid_data: whole-file reads through zlib.

#include <cstdint>
#include <string>
#include <vector>

namespace asteroid::data::detail {

/// The (decompressed) bytes of `path`. zlib reads gzip and plain files alike, so callers need not
/// know which they got. Throws data_error naming `path` if it is missing, unreadable, or a
/// damaged/truncated gzip stream.
std::vector<uint8_t> read_bytes(const std::string& path);

/// The big-endian 32-bit unsigned integer at `p` (IDX headers are big-endian).
inline uint32_t big_endian_u32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

} // namespace asteroid::data::detail
