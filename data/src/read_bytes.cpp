#include "read_bytes.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <zlib.h>

#include "asteroid/data/data_error.hpp"

namespace asteroid::data::detail {

namespace {

struct gz_closer {
  void operator()(gzFile_s* f) const { gzclose(f); }
};

// A first guess at the decompressed size, so that a 47 MB file is read into one buffer: the gzip
// trailer stores the size modulo 2^32 (right for one-member files under 4 GiB); a plain file is
// its own size. One byte more lets the read loop see the end without growing the buffer.
size_t size_hint(const std::string& path, uintmax_t on_disk) {
  std::ifstream f(path, std::ios::binary);
  unsigned char head[2] = {0, 0};
  if (!f.read(reinterpret_cast<char*>(head), 2) || head[0] != 0x1f || head[1] != 0x8b ||
      on_disk < 18)
    return static_cast<size_t>(on_disk) + 1;
  unsigned char tail[4];
  f.seekg(-4, std::ios::end);
  if (!f.read(reinterpret_cast<char*>(tail), 4))
    return static_cast<size_t>(on_disk) * 2 + 1;
  uint32_t isize = uint32_t{tail[0]} | (uint32_t{tail[1]} << 8) | (uint32_t{tail[2]} << 16) |
                   (uint32_t{tail[3]} << 24);
  // A damaged trailer must not make us allocate gigabytes: deflate expands at most ~1032:1.
  return std::min<size_t>(size_t{isize}, static_cast<size_t>(on_disk) * 1032) + 1;
}

} // namespace

file_bytes read_bytes(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    throw data_error(path + ": no such file");
  if (std::filesystem::is_directory(path, ec))
    throw data_error(path + ": is a directory, expected a file");
  auto on_disk = std::filesystem::file_size(path, ec);
  if (ec)
    on_disk = 0;
  errno = 0;
  std::unique_ptr<gzFile_s, gz_closer> file{gzopen(path.c_str(), "rb")};
  if (!file)
    throw data_error(path + ": cannot open (" + std::strerror(errno) + ")");
  // A big buffer roughly halves the time zlib spends in read() calls.
  gzbuffer(file.get(), 1 << 18);
  // new[] without value-initialisation: zero-filling 50 MB that zlib overwrites costs time.
  size_t capacity = std::max<size_t>(size_hint(path, on_disk), 1 << 12);
  file_bytes out{std::unique_ptr<uint8_t[]>(new uint8_t[capacity]), 0};
  for (;;) {
    if (out.size == capacity) {
      size_t grown = capacity * 2;
      std::unique_ptr<uint8_t[]> bigger(new uint8_t[grown]);
      std::memcpy(bigger.get(), out.data.get(), out.size);
      out.data = std::move(bigger);
      capacity = grown;
    }
    size_t want = std::min<size_t>(capacity - out.size, 1u << 30);
    int got = gzread(file.get(), out.data.get() + out.size, static_cast<unsigned>(want));
    if (got <= 0)
      break; // errors are reported below, with the ones zlib only records
    out.size += static_cast<size_t>(got);
  }
  // zlib stops quietly at a cut-off gzip stream and only records the error.
  int code = Z_OK;
  const char* msg = gzerror(file.get(), &code);
  if (code == Z_ERRNO)
    throw data_error(path + ": cannot read (" + std::strerror(errno) + ")");
  if (code != Z_OK) {
    // zlib prefixes its message with the path; keep only the problem.
    std::string problem = msg;
    if (problem.rfind(path + ": ", 0) == 0)
      problem.erase(0, path.size() + 2);
    throw data_error(path + ": damaged or truncated gzip data (" + problem + ")");
  }
  return out;
}

} // namespace asteroid::data::detail
