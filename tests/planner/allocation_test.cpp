#include <catch2/catch.hpp>

#include <algorithm>
#include <random>

#include "asteroid/planner/allocation.hpp"
#include "test_helpers.hpp"

using namespace asteroid::planner;

namespace {

// Linear reference time: f = a + s*y, b = 2f (y > 0).
auto linear(double a, double s) {
  return [a, s](int64_t y) {
    double f = y > 0 ? a + s * static_cast<double>(y) : 0.0;
    return std::make_pair(f, 2 * f);
  };
}

double max_time(const std::vector<int64_t>& shares, const std::vector<double>& speeds,
                const std::function<std::pair<double, double>(int64_t)>& ref) {
  double m = 0;
  for (size_t i = 0; i < shares.size(); ++i)
    if (shares[i] > 0) {
      auto fb = ref(shares[i]);
      m = std::max(m, (fb.first + fb.second) / speeds[i]);
    }
  return m;
}

int64_t sum(const std::vector<int64_t>& v) {
  int64_t s = 0;
  for (auto x : v)
    s += x;
  return s;
}

} // namespace

TEST_CASE("Algorithm 1 shares are proportional to speed without memory limits",
          "[planner][alloc]") {
  auto a = allocate_shares(16, {1, 2, 3, 2}, {16, 16, 16, 16}, linear(0, 1e-3));
  REQUIRE(a.feasible);
  CHECK(a.shares == std::vector<int64_t>{2, 4, 6, 4});
  // Each device: share/speed = 2 samples' worth -> fwd 2 ms, bwd 4 ms.
  CHECK(a.forward_s == Approx(2e-3));
  CHECK(a.backward_s == Approx(4e-3));
}

TEST_CASE("Algorithm 1 clips to the caps and gives the rest to the others",
          "[planner][alloc]") {
  auto a = allocate_shares(10, {1, 4}, {10, 3}, linear(0, 1e-3));
  REQUIRE(a.feasible);
  CHECK(a.shares == std::vector<int64_t>{7, 3});
  auto b = allocate_shares(10, {1, 4, 4}, {10, 2, 10}, linear(0, 1e-3));
  REQUIRE(b.feasible);
  CHECK(b.shares[1] == 2);
  CHECK(sum(b.shares) == 10);
  CHECK(b.shares[2] > b.shares[0]);
}

TEST_CASE("Algorithm 1 reports infeasible groups", "[planner][alloc]") {
  CHECK_FALSE(allocate_shares(10, {1, 1}, {4, 5}, linear(0, 1)).feasible);
  auto a = allocate_shares(10, {1, 1}, {10, -1}, linear(0, 1));
  CHECK_FALSE(a.feasible);
  CHECK(a.tightest == 1);
}

TEST_CASE("Algorithm 1 is optimal (min-max) for increasing times", "[planner][alloc]") {
  // Brute force over every split within the caps for groups of 2-3 devices;
  // straggler offloading must reach the optimum of the largest fwd+bwd time.
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  int checked = 0;
  for (int trial = 0; trial < 400; ++trial) {
    int g = 2 + static_cast<int>(rng() % 2);
    int64_t total = 1 + static_cast<int64_t>(rng() % 20);
    std::vector<double> speeds(g);
    std::vector<int64_t> caps(g);
    for (int i = 0; i < g; ++i) {
      speeds[i] = 0.3 + 3 * u(rng);
      caps[i] = static_cast<int64_t>(rng() % (total + 1));
    }
    // Launch overhead makes proportional shares suboptimal: phase 2 matters.
    auto ref = linear(5e-3 * u(rng), 1e-3 * (0.5 + u(rng)));
    auto a = allocate_shares(total, speeds, caps, ref);
    double best = 1e300;
    std::vector<int64_t> y(g, 0);
    std::function<void(int, int64_t)> rec = [&](int i, int64_t left) {
      if (i == g - 1) {
        if (left <= caps[i]) {
          y[i] = left;
          best = std::min(best, max_time(y, speeds, ref));
        }
        return;
      }
      for (int64_t v = 0; v <= std::min(left, caps[i]); ++v) {
        y[i] = v;
        rec(i + 1, left - v);
      }
    };
    rec(0, total);
    INFO("trial " << trial);
    if (best == 1e300) {
      CHECK_FALSE(a.feasible);
      continue;
    }
    REQUIRE(a.feasible);
    CHECK(sum(a.shares) == total);
    for (int i = 0; i < g; ++i)
      CHECK(a.shares[i] <= caps[i]);
    CHECK(max_time(a.shares, speeds, ref) == Approx(best).epsilon(1e-12));
    ++checked;
  }
  CHECK(checked > 200);
}

TEST_CASE("memory caps: binary search equals the closed form", "[planner][alloc]") {
  std::mt19937_64 rng(5);
  for (int trial = 0; trial < 50; ++trial) {
    auto inst = test::make_random_instance(rng, 6, 2);
    cost_tables t(inst.profile, inst.batch);
    const int L = inst.profile.num_layers();
    for (int a = 0; a < L; ++a)
      for (int e = a + 1; e <= L; ++e)
        for (int K : {1, 2, 4}) {
          int64_t budget = inst.c.devices[0].memory_bytes;
          auto searched = max_share_by_search(
            inst.batch, budget, [&](int64_t y) { return t.memory_bytes(a, e, y, K); });
          CHECK(searched == t.max_share_within(a, e, K, budget, inst.batch));
        }
  }
}

TEST_CASE("allocate_stage names the device short of memory", "[planner][alloc]") {
  model_profile p;
  p.layers.push_back(test::linear_layer("l", 1e-3, 2e-3, 1000, 1'000'000));
  cost_tables t(p, 8);
  // Fixed bytes: 1 MB weights + 1 MB gradients + 1 MB optimizer = 3 MB.
  auto c = cluster::uniform("c", {test::device("big", 1, 4'000'000),
                                  test::device("small", 1, 2'500'000)},
                            1e8);
  auto a = allocate_stage(t, c, 0, 1, {0, 1}, 8, 1);
  CHECK_FALSE(a.feasible);
  CHECK(a.tightest == 1);
  CHECK(a.shortfall_bytes == 500'000);
}
