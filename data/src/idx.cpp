#include "asteroid/data/idx.hpp"


#include "asteroid/data/data_error.hpp"
#include "read_bytes.hpp"

namespace asteroid::data {

namespace {

// Checks the header's promise against the real length: a short file was truncated (e.g. an
// interrupted download), a long one is not the file the header describes.
void check_size(const std::string& path, size_t actual, uint64_t expected,
                const std::string& what) {
  if (actual < expected)
    throw data_error(path + ": truncated: header says " + what + " (" + std::to_string(expected) +
                     " bytes) but the file has " + std::to_string(actual) + " bytes");
  if (actual > expected)
    throw data_error(path + ": " + std::to_string(actual - expected) +
                     " trailing bytes: header says " + what + " (" + std::to_string(expected) +
                     " bytes) but the file has " + std::to_string(actual) + " bytes");
}

void check_header(const std::string& path, const detail::file_bytes& bytes, size_t header_bytes,
                  uint32_t expected_magic, const char* kind) {
  if (bytes.size < header_bytes)
    throw data_error(path + ": truncated: " + std::to_string(bytes.size) +
                     " bytes, shorter than the " + std::to_string(header_bytes) + "-byte " + kind +
                     " header");
  uint32_t magic = detail::big_endian_u32(bytes.data.get());
  if (magic != expected_magic)
    throw data_error(path + ": wrong magic " + std::to_string(magic) + ", expected " +
                     std::to_string(expected_magic) + " (" + kind + ")");
}

// The payload as a uint8 tensor that owns the file buffer: no copy of a 47 MB image file.
torch::Tensor payload_tensor(detail::file_bytes bytes, size_t header_bytes,
                             std::vector<int64_t> sizes) {
  uint8_t* base = bytes.data.release();
  return torch::from_blob(
    base + header_bytes, sizes, [base](void*) { delete[] base; }, torch::kUInt8);
}

} // namespace

torch::Tensor read_idx_images(const std::string& path) {
  auto bytes = detail::read_bytes(path);
  check_header(path, bytes, 16, idx_images_magic, "IDX images");
  uint64_t count = detail::big_endian_u32(bytes.data.get() + 4);
  uint64_t rows = detail::big_endian_u32(bytes.data.get() + 8);
  uint64_t cols = detail::big_endian_u32(bytes.data.get() + 12);
  auto dims = std::to_string(count) + " images of " + std::to_string(rows) + "x" +
              std::to_string(cols);
  if (rows == 0 || cols == 0)
    throw data_error(path + ": zero image dimension in header (" + dims + ")");
  // Each factor is below 2^32, so count * rows fits; the second product may not.
  uint64_t payload = 0;
  if (__builtin_mul_overflow(count * rows, cols, &payload) || payload > UINT64_MAX - 16)
    throw data_error(path + ": impossible header (" + dims + ")");
  check_size(path, bytes.size, 16 + payload, dims);
  return payload_tensor(std::move(bytes), 16,
                        {static_cast<int64_t>(count), static_cast<int64_t>(rows),
                         static_cast<int64_t>(cols)});
}

torch::Tensor read_idx_labels(const std::string& path) {
  auto bytes = detail::read_bytes(path);
  check_header(path, bytes, 8, idx_labels_magic, "IDX labels");
  uint64_t count = detail::big_endian_u32(bytes.data.get() + 4);
  check_size(path, bytes.size, 8 + count, std::to_string(count) + " labels");
  return payload_tensor(std::move(bytes), 8, {static_cast<int64_t>(count)}).to(torch::kInt64);
}

} // namespace asteroid::data
