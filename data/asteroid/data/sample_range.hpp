#pragma once

#include <cstdint>
#include <vector>

namespace asteroid::data {

/// A half-open range of sample positions [begin, end), e.g. within a batch or an epoch order.
struct sample_range {
  int64_t begin = 0;
  int64_t end = 0;

  /// Number of samples in the range.
  int64_t size() const { return end - begin; }

  bool operator==(const sample_range& other) const {
    return begin == other.begin && end == other.end;
  }
  bool operator!=(const sample_range& other) const { return !(*this == other); }
};

/// Part `index` of `count` near-equal contiguous parts of `range`.
///
/// The first `range.size() % count` parts get one extra sample, so the parts cover `range`
/// exactly once, in order. Throws std::invalid_argument for count < 1, index outside
/// [0, count) or an inverted range.
sample_range shard(sample_range range, int64_t index, int64_t count);

/// Splits `range` into consecutive sub-ranges of the given sizes (e.g. shares {3, 5} of [0, 8)
/// give [0, 3) and [3, 8)). Shares may be zero; they must be non-negative and sum to
/// `range.size()`, otherwise std::invalid_argument names the shares and the range size.
std::vector<sample_range> split_by_shares(sample_range range, const std::vector<int64_t>& shares);

/// Integer shares of `total` proportional to `weights` (largest-remainder rounding).
///
/// The result sums to `total` exactly; ties in the remainder go to the earlier entry. Weights must
/// be finite, non-negative and not all zero (std::invalid_argument otherwise).
std::vector<int64_t> proportional_shares(int64_t total, const std::vector<double>& weights);

/// The elements of `indices` at positions [range.begin, range.end), e.g. one device's share of an
/// epoch order. Throws std::out_of_range if the range does not lie inside `indices`.
std::vector<int64_t> take(const std::vector<int64_t>& indices, sample_range range);

} // namespace asteroid::data
