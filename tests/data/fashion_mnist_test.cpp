#include <catch2/catch.hpp>

#include <chrono>
#include <ctime>

#include "asteroid/data/fashion_mnist.hpp"

using namespace asteroid::data;

// Needs Debian's dataset-fashion-mnist (scripts/setup.sh installs it).
TEST_CASE("data: Real Fashion-MNIST loads with the published sizes and balance",
          "[data][fashion-mnist][real]") {
  auto start = std::chrono::steady_clock::now();
  auto cpu_start = std::clock();
  auto train = load_fashion_mnist(default_fashion_mnist_dir, split::train);
  auto seconds =
    std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  auto cpu_seconds = static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC;
  // Wall time depends on machine load; CPU time (all threads) is the steadier number.
  WARN("Fashion-MNIST train split loaded in " << seconds << " s wall, " << cpu_seconds
                                              << " s CPU");
  auto test = load_fashion_mnist(default_fashion_mnist_dir, split::test);

  REQUIRE(train.size() == 60000);
  REQUIRE(test.size() == 10000);
  CHECK(train.sample_shape() == std::vector<int64_t>{1, 28, 28});
  CHECK(train.num_classes() == 10);
  CHECK(train.inputs().scalar_type() == torch::kFloat32);
  CHECK(train.targets().scalar_type() == torch::kInt64);

  // Both splits are exactly balanced: 6000 and 1000 per class.
  auto train_hist = torch::bincount(train.targets(), {}, 10);
  auto test_hist = torch::bincount(test.targets(), {}, 10);
  for (int64_t c = 0; c < 10; ++c) {
    CHECK(train_hist[c].item<int64_t>() == 6000);
    CHECK(test_hist[c].item<int64_t>() == 1000);
  }

  // Pixels span the full byte range, so normalised values span (0 - mean)/std .. (1 - mean)/std.
  double lo = (0 - fashion_mnist_mean) / fashion_mnist_std;
  double hi = (1 - fashion_mnist_mean) / fashion_mnist_std;
  CHECK(train.inputs().min().item<float>() == Approx(lo).epsilon(1e-5));
  CHECK(train.inputs().max().item<float>() == Approx(hi).epsilon(1e-5));
  // The documented constants are the training set's statistics: normalised data is ~N(0, 1).
  CHECK(std::abs(train.inputs().mean().item<double>()) < 0.01);
  CHECK(train.inputs().std().item<double>() == Approx(1.0).margin(0.01));

  // Neighbouring images differ (the reader did not replicate one image).
  CHECK_FALSE(torch::equal(train.inputs()[0], train.inputs()[1]));
  // First training label of Fashion-MNIST is 9 (ankle boot), first test label is 9 too.
  CHECK(train.targets()[0].item<int64_t>() == 9);
  CHECK(test.targets()[0].item<int64_t>() == 9);
}
