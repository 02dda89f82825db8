#pragma once

// Helpers for data tests: write IDX / CIFAR files, plain or gzipped, into a scratch folder.

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <zlib.h>

namespace asteroid::data::test {

using bytes = std::vector<uint8_t>;

/// A fresh, empty folder under ASTEROID_TEST_TMP (CTest may run test cases in parallel).
inline std::string scratch_dir(const std::string& name) {
  auto dir = std::filesystem::path(ASTEROID_TEST_TMP) / "data" / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

inline void put_be32(bytes& out, uint32_t v) {
  out.push_back(static_cast<uint8_t>(v >> 24));
  out.push_back(static_cast<uint8_t>(v >> 16));
  out.push_back(static_cast<uint8_t>(v >> 8));
  out.push_back(static_cast<uint8_t>(v));
}

/// An IDX3 image file: header (magic, count, rows, cols) then count*rows*cols pixel bytes,
/// pixel k = k % 251 so the content is recognisable.
inline bytes idx_images(uint32_t count, uint32_t rows, uint32_t cols, uint32_t magic = 2051) {
  bytes out;
  put_be32(out, magic);
  put_be32(out, count);
  put_be32(out, rows);
  put_be32(out, cols);
  for (uint64_t k = 0; k < uint64_t{count} * rows * cols; ++k)
    out.push_back(static_cast<uint8_t>(k % 251));
  return out;
}

/// An IDX1 label file whose label i is i % 10.
inline bytes idx_labels(uint32_t count, uint32_t magic = 2049) {
  bytes out;
  put_be32(out, magic);
  put_be32(out, count);
  for (uint32_t i = 0; i < count; ++i)
    out.push_back(static_cast<uint8_t>(i % 10));
  return out;
}

inline void write_plain(const std::string& path, const bytes& data) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
  if (!f)
    throw std::runtime_error("cannot write " + path);
}

/// Writes `data` gzip-compressed with zlib.
inline void write_gz(const std::string& path, const bytes& data) {
  gzFile f = gzopen(path.c_str(), "wb");
  if (!f)
    throw std::runtime_error("cannot open " + path);
  int wrote = data.empty() ? 0 : gzwrite(f, data.data(), static_cast<unsigned>(data.size()));
  gzclose(f);
  if (wrote != static_cast<int>(data.size()))
    throw std::runtime_error("cannot write " + path);
}

inline bytes read_plain(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return bytes(std::istreambuf_iterator<char>(f), {});
}

} // namespace asteroid::data::test
