#include "read_bytes.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>

#include <zlib.h>

#include "asteroid/data/data_error.hpp"

namespace asteroid::data::detail {

namespace {

struct gz_closer {
  void operator()(gzFile_s* f) const { gzclose(f); }
};

} // namespace

std::vector<uint8_t> read_bytes(const std::string& path) {
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
  std::vector<uint8_t> bytes;
  // Gzipped IDX files compress about 2:1; growing from there avoids most reallocations.
  size_t capacity = std::max<size_t>(1 << 16, static_cast<size_t>(on_disk) * 2);
  bytes.resize(capacity);
  size_t used = 0;
  for (;;) {
    if (used == bytes.size())
      bytes.resize(bytes.size() * 2);
    size_t want = std::min<size_t>(bytes.size() - used, 1u << 30);
    int got = gzread(file.get(), bytes.data() + used, static_cast<unsigned>(want));
    if (got < 0) {
      int code = 0;
      const char* msg = gzerror(file.get(), &code);
      throw data_error(path + ": cannot read (" + (code == Z_ERRNO ? std::strerror(errno) : msg) +
                       ")");
    }
    if (got == 0)
      break;
    used += static_cast<size_t>(got);
  }
  // zlib stops quietly at a cut-off gzip stream and only records the error.
  int code = Z_OK;
  const char* msg = gzerror(file.get(), &code);
  if (code != Z_OK)
    throw data_error(path + ": damaged or truncated gzip data (" + msg + ")");
  bytes.resize(used);
  return bytes;
}

} // namespace asteroid::data::detail
