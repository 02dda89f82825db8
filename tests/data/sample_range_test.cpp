#include <catch2/catch.hpp>

#include <numeric>

#include "asteroid/data/batch.hpp"
#include "asteroid/data/sample_range.hpp"

using namespace asteroid::data;
using Catch::Matchers::Contains;

TEST_CASE("data: Shards cover a range exactly once, in order", "[data][sharding]") {
  for (int64_t size : {0, 1, 7, 10, 64, 101}) {
    for (int64_t count : {1, 2, 3, 7, 16}) {
      sample_range range{5, 5 + size};
      std::vector<int> hits(static_cast<size_t>(size), 0);
      int64_t expected_begin = range.begin;
      int64_t smallest = size, largest = 0;
      for (int64_t i = 0; i < count; ++i) {
        auto part = shard(range, i, count);
        REQUIRE(part.begin == expected_begin);
        REQUIRE(part.end >= part.begin);
        expected_begin = part.end;
        smallest = std::min(smallest, part.size());
        largest = std::max(largest, part.size());
        for (int64_t k = part.begin; k < part.end; ++k)
          ++hits[static_cast<size_t>(k - range.begin)];
      }
      INFO("size " << size << " count " << count);
      CHECK(expected_begin == range.end);
      CHECK(std::all_of(hits.begin(), hits.end(), [](int h) { return h == 1; }));
      CHECK(largest - smallest <= 1); // near-equal
    }
  }
  CHECK(shard({0, 10}, 0, 3) == sample_range{0, 4});
  CHECK(shard({0, 10}, 2, 3) == sample_range{7, 10});
  CHECK_THROWS_AS(shard({0, 10}, 3, 3), std::invalid_argument);
  CHECK_THROWS_AS(shard({0, 10}, 0, 0), std::invalid_argument);
}

TEST_CASE("data: Unequal shares split a range consecutively", "[data][sharding]") {
  auto parts = split_by_shares({0, 8}, {3, 5});
  REQUIRE(parts.size() == 2);
  CHECK(parts[0] == sample_range{0, 3});
  CHECK(parts[1] == sample_range{3, 8});
  parts = split_by_shares({10, 16}, {0, 4, 0, 2});
  CHECK(parts[1] == sample_range{10, 14});
  CHECK(parts[2] == sample_range{14, 14});
  CHECK(parts[3] == sample_range{14, 16});
  CHECK_THROWS_WITH(split_by_shares({0, 8}, {3, 4}),
                    Contains("shares {3, 4} sum to 7, but the range [0, 8) has 8 samples"));
  CHECK_THROWS_WITH(split_by_shares({0, 8}, {9, -1}), Contains("negative share"));
}

TEST_CASE("data: Proportional shares sum to the total", "[data][sharding]") {
  CHECK(proportional_shares(8, {3, 5}) == std::vector<int64_t>{3, 5});
  CHECK(proportional_shares(10, {1, 1, 1}) == std::vector<int64_t>{4, 3, 3});
  CHECK(proportional_shares(7, {0, 2, 1}) == std::vector<int64_t>{0, 5, 2});
  CHECK(proportional_shares(3, {0.1, 0, 0.1}) == std::vector<int64_t>{2, 0, 1});
  for (int64_t total : {0, 1, 13, 64, 1000}) {
    auto shares = proportional_shares(total, {0.7, 0.05, 1.3, 2.9});
    CHECK(std::accumulate(shares.begin(), shares.end(), int64_t{0}) == total);
  }
  CHECK_THROWS_AS(proportional_shares(4, {0, 0}), std::invalid_argument);
  CHECK_THROWS_AS(proportional_shares(4, {1, -1}), std::invalid_argument);
}

TEST_CASE("data: take selects positions of an index list", "[data][sharding]") {
  std::vector<int64_t> order{9, 4, 7, 1, 0};
  CHECK(take(order, {1, 4}) == std::vector<int64_t>{4, 7, 1});
  CHECK(take(order, {5, 5}).empty());
  CHECK_THROWS_AS(take(order, {3, 6}), std::out_of_range);
}

TEST_CASE("data: Batches split into shares and concatenate back", "[data][sharding]") {
  batch b{torch::arange(16, torch::kFloat32).view({8, 2}), torch::arange(8, torch::kInt64)};
  auto parts = split_batch(b, {3, 5});
  REQUIRE(parts.size() == 2);
  CHECK(parts[0].size() == 3);
  CHECK(parts[1].size() == 5);
  CHECK(parts[1].targets[0].item<int64_t>() == 3);
  CHECK(parts[1].inputs[0][1].item<float>() == 7);
  // Parts are views: no copy of the batch.
  CHECK(parts[1].inputs.data_ptr<float>() == b.inputs.data_ptr<float>() + 6);
  auto whole = concat(parts);
  CHECK(torch::equal(whole.inputs, b.inputs));
  CHECK(torch::equal(whole.targets, b.targets));
  CHECK(slice(b, {2, 4}).targets[1].item<int64_t>() == 3);
  CHECK_THROWS_AS(slice(b, {6, 9}), std::out_of_range);
  CHECK_THROWS_AS(split_batch(b, {3, 4}), std::invalid_argument);
}
