#pragma once
/// \file
/// A contiguous range of a sequential model's layers.

#include <string>

namespace asteroid::models {

/// Layers [first, end) of a model; `end == -1` means up to the last layer,
/// so the default is the whole model.
struct layer_range {
  int first = 0;
  int end = -1;

  /// Whether layer `i` lies in the range.
  bool contains(int i) const noexcept {
    return i >= first && (end < 0 || i < end);
  }
  /// Whether the range is the whole model, whatever its size.
  bool whole() const noexcept { return first == 0 && end < 0; }
};

/// "[first, end)" for messages ("[first, last]" reads "[2, end)" for -1).
inline std::string to_string(const layer_range& r) {
  return "[" + std::to_string(r.first) + ", "
         + (r.end < 0 ? std::string("end") : std::to_string(r.end)) + ")";
}

} // namespace asteroid::models
