#include "asteroid/kernels/bucket.hpp"

#include <catch2/catch.hpp>

using namespace asteroid::kernels;

namespace {

std::vector<torch::Tensor> clones(const std::vector<torch::Tensor>& ts) {
  std::vector<torch::Tensor> out;
  for (const auto& t : ts)
    out.push_back(t.clone());
  return out;
}

std::vector<std::size_t> bucket_sizes(const std::vector<bucket_layout>& layouts) {
  std::vector<std::size_t> out;
  for (const auto& l : layouts)
    out.push_back(l.slots.size());
  return out;
}

} // namespace

TEST_CASE("flatten then unflatten restores every gradient", "[bucket]") {
  torch::manual_seed(1);
  std::vector<torch::Tensor> grads{torch::randn({3, 4}), torch::randn({7}), torch::randn({2, 2, 2}),
                                   torch::randn({1}), torch::randn({5, 5})};
  auto original = clones(grads);
  auto buckets = flatten_into_buckets(grads, 64);
  std::int64_t total = 0;
  for (const auto& b : buckets) {
    CHECK(b.flat.dim() == 1);
    CHECK(b.flat.is_contiguous());
    CHECK(b.flat.numel() == b.layout.numel);
    for (const auto& s : b.layout.slots)
      CHECK(torch::equal(b.flat.narrow(0, s.offset, s.numel),
                         original[s.tensor_index].flatten()));
    total += b.flat.numel();
  }
  CHECK(total == 12 + 7 + 8 + 1 + 25);

  for (auto& g : grads)
    g.zero_();
  // Simulate the all-reduce: the buckets come back changed.
  for (auto& b : buckets)
    b.flat.mul_(2);
  unflatten_from_buckets(buckets, grads);
  for (std::size_t i = 0; i < grads.size(); ++i)
    CHECK(torch::equal(grads[i], original[i] * 2));
}

TEST_CASE("buckets close exactly at the byte limit", "[bucket]") {
  auto f = [](int64_t n) { return torch::zeros({n}); }; // 4 bytes per element
  SECTION("exact fit stays in one bucket") {
    CHECK(bucket_sizes(plan_buckets({f(4), f(4)}, 32)) == std::vector<std::size_t>{2});
  }
  SECTION("one byte over starts a new bucket") {
    CHECK(bucket_sizes(plan_buckets({f(4), f(5)}, 32)) == std::vector<std::size_t>{1, 1});
  }
  SECTION("an oversized tensor gets a bucket of its own") {
    auto l = plan_buckets({f(2), f(100), f(2), f(2)}, 16);
    CHECK(bucket_sizes(l) == std::vector<std::size_t>{1, 1, 2});
    CHECK(l[1].numel == 100);
    CHECK(l[2].slots[1].offset == 2);
    CHECK(l[2].slots[1].tensor_index == 3);
  }
  SECTION("order and offsets are preserved") {
    auto l = plan_buckets({f(3), f(1), f(4), f(8)}, 32);
    REQUIRE(bucket_sizes(l) == std::vector<std::size_t>{3, 1});
    CHECK(l[0].slots[0].offset == 0);
    CHECK(l[0].slots[1].offset == 3);
    CHECK(l[0].slots[2].offset == 4);
    CHECK(l[1].slots[0].tensor_index == 3);
  }
  SECTION("empty input and empty tensors") {
    CHECK(plan_buckets({}, 16).empty());
    auto l = plan_buckets({f(0), f(2), f(0)}, 8);
    CHECK(bucket_sizes(l) == std::vector<std::size_t>{3});
    CHECK(l[0].numel == 2);
  }
}

TEST_CASE("mixed dtypes never share a bucket", "[bucket]") {
  torch::manual_seed(2);
  std::vector<torch::Tensor> grads{torch::randn({4}), torch::randn({4}, torch::kFloat64),
                                   torch::randn({4}, torch::kFloat64), torch::randn({4}),
                                   torch::randn({3}, torch::kFloat16)};
  auto layouts = plan_buckets(grads, 1 << 20);
  REQUIRE(bucket_sizes(layouts) == std::vector<std::size_t>{1, 2, 1, 1});
  CHECK(layouts[1].dtype == torch::kFloat64);
  CHECK(layouts[3].dtype == torch::kFloat16);

  auto original = clones(grads);
  auto buckets = flatten_into_buckets(grads, 1 << 20);
  for (auto& g : grads)
    g.zero_();
  unflatten_from_buckets(buckets, grads);
  for (std::size_t i = 0; i < grads.size(); ++i) {
    CHECK(grads[i].scalar_type() == original[i].scalar_type());
    CHECK(torch::equal(grads[i], original[i]));
  }
}

TEST_CASE("non-contiguous gradients flatten and unflatten by value", "[bucket]") {
  auto base = torch::arange(24, torch::kFloat32).reshape({4, 6});
  std::vector<torch::Tensor> grads{base.t(), base.slice(1, 0, 6, 2)};
  REQUIRE_FALSE(grads[0].is_contiguous());
  auto buckets = flatten_into_buckets(grads, 1024);
  REQUIRE(buckets.size() == 1);
  CHECK(torch::equal(buckets[0].flat.narrow(0, 0, 24), base.t().flatten()));
  CHECK(torch::equal(buckets[0].flat.narrow(0, 24, 12), base.slice(1, 0, 6, 2).flatten()));
  buckets[0].flat.neg_();
  auto storage = torch::zeros({4, 6});
  std::vector<torch::Tensor> targets{torch::zeros({6, 4}), storage.slice(1, 0, 6, 2)};
  unflatten_from_buckets(buckets, targets);
  CHECK(torch::equal(targets[0], -base.t()));
  CHECK(torch::equal(storage.slice(1, 0, 6, 2), -base.slice(1, 0, 6, 2)));
  CHECK(torch::equal(storage.slice(1, 1, 6, 2), torch::zeros({4, 3}))); // untouched
}

TEST_CASE("flatten_into reuses a bucket buffer", "[bucket]") {
  std::vector<torch::Tensor> grads{torch::ones({2}), torch::full({3}, 2.0)};
  auto buckets = flatten_into_buckets(grads, 1024);
  auto* before = buckets[0].flat.data_ptr();
  grads[0].fill_(5);
  flatten_into(buckets[0], grads);
  CHECK(buckets[0].flat.data_ptr() == before);
  CHECK(torch::equal(buckets[0].flat, torch::tensor({5.f, 5.f, 2.f, 2.f, 2.f})));
}

TEST_CASE("mismatches between buckets and gradients are named", "[bucket][errors]") {
  std::vector<torch::Tensor> grads{torch::ones({2}), torch::ones({3})};
  auto buckets = flatten_into_buckets(grads, 1024);

  CHECK_THROWS_WITH(plan_buckets(grads, 0), "bucket size must be positive, got 0 bytes");
  CHECK_THROWS_WITH(plan_buckets({torch::ones({1}), torch::Tensor()}, 8), "grad 1 is undefined");

  std::vector<torch::Tensor> fewer{torch::zeros({2})};
  CHECK_THROWS_WITH(unflatten_from_buckets(buckets, fewer),
                    "bucket slot refers to grad 1 but only 1 tensors were given");
  std::vector<torch::Tensor> resized{torch::zeros({2}), torch::zeros({4})};
  CHECK_THROWS_WITH(unflatten_from_buckets(buckets, resized),
                    "grad 1 has 4 elements but its bucket slot has 3");
  CHECK(torch::equal(resized[0], torch::zeros({2}))); // checked before writing anything
  std::vector<torch::Tensor> retyped{torch::zeros({2}), torch::zeros({3}, torch::kFloat64)};
  CHECK_THROWS_WITH(unflatten_from_buckets(buckets, retyped),
                    "grad 1 is Double on cpu but its bucket is Float on cpu");
  auto broken = buckets;
  broken[0].flat = torch::zeros({4});
  CHECK_THROWS_WITH(flatten_into(broken[0], grads),
                    Catch::StartsWith("bucket buffer does not match its layout"));
}

TEST_CASE("gradients that are views of their bucket: autograd accumulates into the bucket "
          "and flattening has nothing to copy", "[bucket]") {
  auto w = torch::randn({3, 4}, torch::requires_grad());
  auto b = torch::randn({4}, torch::requires_grad());
  auto empty = torch::zeros({0}, torch::requires_grad());
  std::vector<torch::Tensor> params{w, b, empty};
  auto loss = [&] { return (w.matmul(torch::ones({4})) + b.sum()).sum() + empty.sum(); };
  loss().backward();
  std::vector<torch::Tensor> grads{w.grad(), b.grad(), empty.grad()};
  REQUIRE(grads[2].defined());
  auto buckets = flatten_into_buckets(grads, int64_t{1} << 40);
  REQUIRE(buckets.size() == 1);
  // Fresh gradients live elsewhere.
  CHECK_FALSE(aliases(buckets[0], grads));
  auto views = slot_views(buckets[0], grads);
  REQUIRE(views.size() == 3);
  CHECK(torch::equal(views[0], grads[0]));
  CHECK(torch::equal(views[1], grads[1]));
  for (size_t i = 0; i < params.size(); ++i)
    params[i].mutable_grad() = views[i];
  CHECK(aliases(buckets[0], {w.grad(), b.grad(), empty.grad()}));
  // What a step does: zero in place, backward twice (two micro-batches).
  auto before = buckets[0].flat.clone();
  for (auto& p : params)
    p.mutable_grad().zero_();
  loss().backward();
  loss().backward();
  CHECK(aliases(buckets[0], {w.grad(), b.grad(), empty.grad()}));
  CHECK(torch::allclose(buckets[0].flat, 2 * before));
  // Another layout, or a gradient replaced by a copy, is no alias.
  CHECK_FALSE(aliases(buckets[0], {w.grad(), b.grad()}));
  CHECK_FALSE(aliases(buckets[0], {w.grad().clone(), b.grad(), empty.grad()}));
  CHECK_THROWS_WITH(slot_views(buckets[0], {w.grad(), torch::zeros({5}), empty.grad()}),
                    Catch::Contains("has 5 elements"));
}
