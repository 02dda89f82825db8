// LibTorch first: its glog CHECK would otherwise replace Catch2's.
#include <torch/torch.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <set>

#include "asteroid/data/sampler.hpp"

using namespace asteroid::data;

namespace {

bool is_permutation_of_range(std::vector<int64_t> v, int64_t n) {
  if (static_cast<int64_t>(v.size()) != n)
    return false;
  std::sort(v.begin(), v.end());
  for (int64_t i = 0; i < n; ++i)
    if (v[i] != i)
      return false;
  return true;
}

} // namespace

TEST_CASE("data: Epoch order is a permutation fixed by size, seed and epoch", "[data][sampler]") {
  auto a = epoch_order(1000, 42, 0);
  CHECK(is_permutation_of_range(a, 1000));
  CHECK(a == epoch_order(1000, 42, 0));
  CHECK(a != epoch_order(1000, 43, 0));
  CHECK(a != epoch_order(1000, 42, 1));
  // It is shuffled: few elements stay in place (about 1 expected).
  int64_t fixed = 0;
  for (int64_t i = 0; i < 1000; ++i)
    fixed += a[i] == i;
  CHECK(fixed < 10);
  CHECK(epoch_order(0, 1, 0).empty());
  CHECK(epoch_order(1, 1, 0) == std::vector<int64_t>{0});
  CHECK_THROWS_AS(epoch_order(-1, 1, 0), std::invalid_argument);
}

TEST_CASE("data: Epoch order leaves the global torch RNG alone", "[data][sampler]") {
  torch::manual_seed(5);
  auto expected = torch::rand({3});
  torch::manual_seed(5);
  epoch_order(10000, 9, 2);
  sampler(100, 1).batches(0, 7);
  CHECK(torch::equal(torch::rand({3}), expected));
}

TEST_CASE("data: Sampler cuts the epoch order into batches", "[data][sampler]") {
  sampler s(10, 3);
  auto batches = s.batches(4, 4);
  REQUIRE(batches.size() == 3);
  CHECK(batches[0].size() == 4);
  CHECK(batches[2].size() == 2);
  std::vector<int64_t> joined;
  for (const auto& b : batches)
    joined.insert(joined.end(), b.begin(), b.end());
  CHECK(joined == epoch_order(10, 3, 4));
  CHECK(s.batches(4, 4, true).size() == 2);
  CHECK(s.num_batches(4) == 3);
  CHECK(s.num_batches(4, true) == 2);
  CHECK(s.num_batches(5) == 2);

  sampler in_order(5, 3, false);
  CHECK(in_order.order(7) == std::vector<int64_t>{0, 1, 2, 3, 4});
  CHECK_THROWS_AS(s.batches(0, 0), std::invalid_argument);
}
