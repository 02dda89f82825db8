#pragma once

#include <cstdint>
#include <vector>

namespace asteroid::data {

/// A permutation of [0, size) that depends only on (size, seed, epoch).
///
/// Uses a local std::mt19937_64 and its own Fisher-Yates shuffle (std::shuffle and the std
/// distributions are implementation-defined), so the order is the same on every platform and the
/// global torch RNG, which drives model initialisation and dropout, is untouched.
std::vector<int64_t> epoch_order(int64_t size, uint64_t seed, int64_t epoch);

/// Deterministic epoch orders and mini-batches of index lists for a dataset of a given size.
class sampler {
public:
  /// Throws std::invalid_argument for a negative size.
  sampler(int64_t size, uint64_t seed, bool shuffle = true);

  /// The order of epoch `epoch`: epoch_order(size, seed, epoch), or 0..size-1 without shuffling.
  std::vector<int64_t> order(int64_t epoch) const;

  /// The order of epoch `epoch` cut into consecutive batches of `batch_size` indices; the last
  /// batch is shorter unless `drop_last`, in which case it is dropped.
  std::vector<std::vector<int64_t>> batches(int64_t epoch, int64_t batch_size,
                                            bool drop_last = false) const;

  /// Number of batches batches() returns.
  int64_t num_batches(int64_t batch_size, bool drop_last = false) const;

  int64_t size() const { return size_; }
  uint64_t seed() const { return seed_; }
  bool shuffle() const { return shuffle_; }

private:
  int64_t size_;
  uint64_t seed_;
  bool shuffle_;
};

} // namespace asteroid::data
