#pragma once

#include <cstdint>

namespace asteroid::training {

/// Measures LibTorch CPU-allocator usage (bytes live now and the peak).
///
/// The first tracker installs a counting wrapper around LibTorch's CPU
/// allocator for the rest of the process; it only adds two atomic updates per
/// allocation. Allocations made by libraries outside LibTorch's allocator
/// (e.g. oneDNN scratch space) are not seen.
class memory_tracker {
public:
  memory_tracker();

  /// Bytes allocated through LibTorch's CPU allocator and not yet freed.
  int64_t current_bytes() const;

  /// Highest `current_bytes()` since the last `reset_peak()`.
  int64_t peak_bytes() const;

  /// Sets the peak to the current usage.
  void reset_peak();
};

} // namespace asteroid::training
