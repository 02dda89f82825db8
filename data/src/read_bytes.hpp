#pragma once

// Internal to asteroid_data: whole-file reads through zlib.

#include <cstdint>
#include <memory>
#include <string>

namespace asteroid::data::detail {

/// The contents of a file: `size` bytes at `data.get()`.
struct file_bytes {
  std::unique_ptr<uint8_t[]> data;
  size_t size = 0;
};

/// The (decompressed) bytes of `path`. zlib reads gzip and plain files alike, so callers need not
/// know which they got. Throws data_error naming `path` if it is missing, unreadable, or a
/// damaged/truncated gzip stream.
file_bytes read_bytes(const std::string& path);

/// The big-endian 32-bit unsigned integer at `p` (IDX headers are big-endian).
inline uint32_t big_endian_u32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

} // namespace asteroid::data::detail
