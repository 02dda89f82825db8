#pragma once

#include <cstdint>
#include <string>

#include <torch/torch.h>

namespace asteroid::data {

/// Magic number of an IDX file of unsigned-byte images (type 0x08, 3 dimensions).
inline constexpr uint32_t idx_images_magic = 2051;
/// Magic number of an IDX file of unsigned-byte labels (type 0x08, 1 dimension).
inline constexpr uint32_t idx_labels_magic = 2049;

/// Reads an IDX3 unsigned-byte image file, gzipped or not (zlib detects which).
///
/// Returns a uint8 tensor [N, rows, cols]. Throws data_error naming `path` if the file is missing,
/// not valid gzip, has the wrong magic, a zero dimension, or a size that does not match the header
/// (truncated, or with trailing bytes).
torch::Tensor read_idx_images(const std::string& path);

/// Reads an IDX1 unsigned-byte label file, gzipped or not; returns an int64 tensor [N].
/// Throws data_error naming `path` on the same problems as read_idx_images.
torch::Tensor read_idx_labels(const std::string& path);

} // namespace asteroid::data
