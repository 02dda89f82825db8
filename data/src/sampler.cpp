#include "asteroid/data/sampler.hpp"

#include <numeric>
#include <stdexcept>
#include <string>

#include "random.hpp"

namespace asteroid::data {

std::vector<int64_t> epoch_order(int64_t size, uint64_t seed, int64_t epoch) {
  if (size < 0)
    throw std::invalid_argument("epoch_order: negative size " + std::to_string(size));
  std::vector<int64_t> order(static_cast<size_t>(size));
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(detail::derive_seed(seed, static_cast<uint64_t>(epoch)));
  for (int64_t i = size - 1; i > 0; --i) {
    auto j = static_cast<int64_t>(detail::uniform_below(rng, static_cast<uint64_t>(i) + 1));
    std::swap(order[i], order[j]);
  }
  return order;
}

sampler::sampler(int64_t size, uint64_t seed, bool shuffle)
  : size_(size), seed_(seed), shuffle_(shuffle) {
  if (size < 0)
    throw std::invalid_argument("sampler: negative size " + std::to_string(size));
}

std::vector<int64_t> sampler::order(int64_t epoch) const {
  if (shuffle_)
    return epoch_order(size_, seed_, epoch);
  std::vector<int64_t> order(static_cast<size_t>(size_));
  std::iota(order.begin(), order.end(), 0);
  return order;
}

int64_t sampler::num_batches(int64_t batch_size, bool drop_last) const {
  if (batch_size < 1)
    throw std::invalid_argument("sampler: batch size must be at least 1, got " +
                                std::to_string(batch_size));
  return drop_last ? size_ / batch_size : (size_ + batch_size - 1) / batch_size;
}

std::vector<std::vector<int64_t>> sampler::batches(int64_t epoch, int64_t batch_size,
                                                   bool drop_last) const {
  int64_t n = num_batches(batch_size, drop_last);
  auto all = order(epoch);
  std::vector<std::vector<int64_t>> out;
  out.reserve(static_cast<size_t>(n));
  for (int64_t b = 0; b < n; ++b) {
    auto begin = all.begin() + b * batch_size;
    auto end = all.begin() + std::min(size_, (b + 1) * batch_size);
    out.emplace_back(begin, end);
  }
  return out;
}

} // namespace asteroid::data
