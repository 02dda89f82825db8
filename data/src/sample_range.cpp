#include "asteroid/data/sample_range.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>

namespace asteroid::data {

namespace {

std::string to_text(sample_range r) {
  return "[" + std::to_string(r.begin) + ", " + std::to_string(r.end) + ")";
}

std::string to_text(const std::vector<int64_t>& v) {
  std::string out = "{";
  for (size_t i = 0; i < v.size(); ++i)
    out += (i ? ", " : "") + std::to_string(v[i]);
  return out + "}";
}

} // namespace

sample_range shard(sample_range range, int64_t index, int64_t count) {
  if (range.end < range.begin)
    throw std::invalid_argument("shard: inverted range " + to_text(range));
  if (count < 1)
    throw std::invalid_argument("shard: count must be at least 1, got " + std::to_string(count));
  if (index < 0 || index >= count)
    throw std::invalid_argument("shard: index " + std::to_string(index) + " outside [0, " +
                                std::to_string(count) + ")");
  int64_t base = range.size() / count;
  int64_t extra = range.size() % count;
  int64_t begin = range.begin + index * base + std::min(index, extra);
  return {begin, begin + base + (index < extra ? 1 : 0)};
}

std::vector<sample_range> split_by_shares(sample_range range, const std::vector<int64_t>& shares) {
  if (range.end < range.begin)
    throw std::invalid_argument("split_by_shares: inverted range " + to_text(range));
  int64_t sum = 0;
  for (auto s : shares) {
    if (s < 0)
      throw std::invalid_argument("split_by_shares: negative share in " + to_text(shares));
    sum += s;
  }
  if (sum != range.size())
    throw std::invalid_argument("split_by_shares: shares " + to_text(shares) + " sum to " +
                                std::to_string(sum) + ", but the range " + to_text(range) +
                                " has " + std::to_string(range.size()) + " samples");
  std::vector<sample_range> parts;
  parts.reserve(shares.size());
  int64_t at = range.begin;
  for (auto s : shares) {
    parts.push_back({at, at + s});
    at += s;
  }
  return parts;
}

std::vector<int64_t> proportional_shares(int64_t total, const std::vector<double>& weights) {
  if (total < 0)
    throw std::invalid_argument("proportional_shares: negative total " + std::to_string(total));
  if (weights.empty())
    throw std::invalid_argument("proportional_shares: no weights");
  double sum = 0;
  for (auto w : weights) {
    if (!std::isfinite(w) || w < 0)
      throw std::invalid_argument("proportional_shares: weight " + std::to_string(w) +
                                  " is negative or not finite");
    sum += w;
  }
  if (sum <= 0)
    throw std::invalid_argument("proportional_shares: all weights are zero");
  std::vector<int64_t> shares(weights.size());
  std::vector<double> remainder(weights.size());
  int64_t given = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    double exact = static_cast<double>(total) * weights[i] / sum;
    shares[i] = static_cast<int64_t>(std::floor(exact));
    remainder[i] = exact - static_cast<double>(shares[i]);
    given += shares[i];
  }
  // Rounding can in principle overshoot by one; take it back from the smallest remainder.
  while (given > total) {
    size_t worst = 0;
    for (size_t i = 0; i < shares.size(); ++i)
      if (shares[i] > 0 && (shares[worst] == 0 || remainder[i] < remainder[worst]))
        worst = i;
    --shares[worst];
    --given;
  }
  std::vector<size_t> order(weights.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return remainder[a] > remainder[b]; });
  for (size_t k = 0; given < total; k = (k + 1) % order.size()) {
    // Zero-weight entries never receive samples.
    if (weights[order[k]] > 0) {
      ++shares[order[k]];
      ++given;
    }
  }
  return shares;
}

std::vector<int64_t> take(const std::vector<int64_t>& indices, sample_range range) {
  if (range.begin < 0 || range.end < range.begin ||
      range.end > static_cast<int64_t>(indices.size()))
    throw std::out_of_range("take: range " + to_text(range) + " is not inside [0, " +
                            std::to_string(indices.size()) + ")");
  return {indices.begin() + range.begin, indices.begin() + range.end};
}

} // namespace asteroid::data
