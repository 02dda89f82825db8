#include "asteroid/kernels/weighted_sum.hpp"

#include <catch2/catch.hpp>

using namespace asteroid::kernels;

TEST_CASE("weighted sum accumulates share-weighted gradients", "[weighted_sum]") {
  torch::manual_seed(3);
  // Three devices that processed 50%, 30% and 20% of the batch.
  std::vector<torch::Tensor> g{torch::randn({10}, torch::kFloat64),
                               torch::randn({10}, torch::kFloat64),
                               torch::randn({10}, torch::kFloat64)};
  std::vector<double> w{0.5, 0.3, 0.2};
  auto acc = torch::zeros({10}, torch::kFloat64);
  for (int i = 0; i < 3; ++i)
    weighted_sum_(acc, g[i], w[i]);
  auto expected = g[0] * 0.5 + g[1] * 0.3 + g[2] * 0.2;
  CHECK(torch::allclose(acc, expected, 1e-12, 1e-12));
  CHECK_FALSE(torch::allclose(acc, g[0] + g[1] + g[2]));

  for (auto dtype : {torch::kFloat32, torch::kFloat16, torch::kBFloat16}) {
    auto d = torch::ones({4}, dtype);
    weighted_sum_(d, torch::full({4}, 2.0, dtype), 0.25);
    CHECK(torch::equal(d, torch::full({4}, 1.5, dtype)));
  }
  auto strided = torch::zeros({4, 4}).t();
  weighted_sum_(strided, torch::ones({4, 4}), -2.0);
  CHECK(torch::equal(strided, torch::full({4, 4}, -2.0)));
}

TEST_CASE("scale multiplies in place", "[weighted_sum]") {
  auto t = torch::arange(5, torch::kFloat32);
  auto* p = t.data_ptr();
  scale_(t, 0.5);
  CHECK(t.data_ptr() == p);
  CHECK(torch::equal(t, torch::arange(5, torch::kFloat32) * 0.5));
  auto i = torch::ones({2}, torch::kInt64);
  CHECK_THROWS_WITH(scale_(i, 2.0), "scale: need a defined floating tensor");
}

TEST_CASE("weighted sum rejects mismatched operands", "[weighted_sum][errors]") {
  auto dst = torch::zeros({3});
  CHECK_THROWS_WITH(weighted_sum_(dst, torch::zeros({4}), 1.0),
                    "weighted sum: dst is [3] Float on cpu but src is [4] Float on cpu");
  CHECK_THROWS_WITH(weighted_sum_(dst, torch::zeros({3}, torch::kFloat64), 1.0),
                    "weighted sum: dst is [3] Float on cpu but src is [3] Double on cpu");
  auto ints = torch::zeros({3}, torch::kInt32);
  CHECK_THROWS_WITH(weighted_sum_(ints, ints, 1.0),
                    "weighted sum: dst has dtype Int, need a floating type");
  torch::Tensor undefined;
  CHECK_THROWS_WITH(weighted_sum_(undefined, dst, 1.0), "weighted sum: dst is undefined");
}
