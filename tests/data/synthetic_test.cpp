#include <catch2/catch.hpp>

#include "asteroid/data/data_error.hpp"
#include "asteroid/data/synthetic.hpp"

using namespace asteroid::data;
using Catch::Matchers::Contains;

TEST_CASE("data: Synthetic images are deterministic and carry a class signal",
          "[data][synthetic]") {
  synthetic_images_options o;
  o.count = 600;
  o.shape = {3, 8, 8};
  o.num_classes = 4;
  o.seed = 7;
  // The global RNG neither matters nor moves.
  torch::manual_seed(123);
  auto a = make_synthetic_images(o);
  auto global_after_a = torch::rand({4});
  torch::manual_seed(123);
  auto global_without = torch::rand({4});
  torch::manual_seed(999);
  auto b = make_synthetic_images(o);
  CHECK(torch::equal(global_after_a, global_without));
  REQUIRE(a.size() == 600);
  REQUIRE(a.sample_shape() == std::vector<int64_t>{3, 8, 8});
  REQUIRE(a.inputs().scalar_type() == torch::kFloat32);
  CHECK(torch::equal(a.inputs(), b.inputs()));
  CHECK(torch::equal(a.targets(), b.targets()));

  auto other_seed = o;
  other_seed.seed = 8;
  CHECK_FALSE(torch::equal(a.inputs(), make_synthetic_images(other_seed).inputs()));

  // Every class occurs; a nearest-class-mean classifier fit on one stream works on another,
  // which is only possible if the signal is shared between streams and learnable.
  auto hist = torch::bincount(a.targets(), {}, 4);
  CHECK(hist.min().item<int64_t>() > 100);
  auto flat = a.inputs().view({600, -1});
  auto means = torch::zeros({4, flat.size(1)});
  for (int64_t c = 0; c < 4; ++c)
    means[c] = flat.index({a.targets() == c}).mean(0);
  auto test_opts = o;
  test_opts.stream = 1;
  auto test = make_synthetic_images(test_opts);
  CHECK_FALSE(torch::equal(test.inputs(), a.inputs()));
  auto predicted = torch::cdist(test.inputs().view({600, -1}), means).argmin(1);
  double accuracy = predicted.eq(test.targets()).to(torch::kFloat64).mean().item<double>();
  CHECK(accuracy > 0.9);
}

TEST_CASE("data: Synthetic images reject bad options", "[data][synthetic]") {
  synthetic_images_options o;
  o.shape = {3, 0, 8};
  CHECK_THROWS_WITH(make_synthetic_images(o), Contains("non-positive dimension 0"));
  o = {};
  o.count = 0;
  CHECK_THROWS_AS(make_synthetic_images(o), data_error);
}

TEST_CASE("data: Synthetic tokens are deterministic, in range and labelled by content",
          "[data][synthetic]") {
  synthetic_tokens_options o;
  o.count = 500;
  o.length = 16;
  o.vocab = 50;
  o.num_classes = 3;
  o.seed = 11;
  auto a = make_synthetic_tokens(o);
  auto b = make_synthetic_tokens(o);
  REQUIRE(a.inputs().sizes() == torch::IntArrayRef{500, 16});
  REQUIRE(a.inputs().scalar_type() == torch::kInt64);
  CHECK(torch::equal(a.inputs(), b.inputs()));
  CHECK(torch::equal(a.targets(), b.targets()));
  CHECK(a.inputs().min().item<int64_t>() >= 0);
  CHECK(a.inputs().max().item<int64_t>() < 50);
  CHECK(a.inputs().max().item<int64_t>() >= 45); // the whole vocabulary is used

  auto other = o;
  other.seed = 12;
  CHECK_FALSE(torch::equal(a.inputs(), make_synthetic_tokens(other).inputs()));

  // Labels are recomputed here independently: the class with the most ids of its residue.
  auto residues = a.inputs().remainder(3);
  for (int64_t s = 0; s < 500; ++s) {
    auto counts = torch::stack({residues[s].eq(0).sum(), residues[s].eq(1).sum(),
                                residues[s].eq(2).sum()});
    // argmax picks the first maximum, matching the documented tie rule.
    int64_t expected = 0;
    for (int64_t k = 1; k < 3; ++k)
      if (counts[k].item<int64_t>() > counts[expected].item<int64_t>())
        expected = k;
    REQUIRE(a.targets()[s].item<int64_t>() == expected);
  }
  auto hist = torch::bincount(a.targets(), {}, 3);
  CHECK(hist.min().item<int64_t>() > 100);
}

TEST_CASE("data: Synthetic token label rule breaks ties toward the smaller class",
          "[data][synthetic]") {
  std::vector<int64_t> tokens{4, 5, 7, 8}; // residues mod 3: 1, 2, 1, 2
  CHECK(synthetic_token_label(tokens.data(), 4, 3) == 1);
  tokens = {3, 4, 5, 6}; // 0, 1, 2, 0
  CHECK(synthetic_token_label(tokens.data(), 4, 3) == 0);
  tokens = {2, 5, 8, 0}; // 2, 2, 2, 0
  CHECK(synthetic_token_label(tokens.data(), 4, 3) == 2);
}

TEST_CASE("data: Synthetic tokens reject bad options", "[data][synthetic]") {
  synthetic_tokens_options o;
  o.vocab = 2;
  o.num_classes = 5;
  CHECK_THROWS_WITH(make_synthetic_tokens(o),
                    Contains("synthetic-tokens: vocab 2 is smaller than num_classes 5"));
  o = {};
  o.signal = 1.5;
  CHECK_THROWS_WITH(make_synthetic_tokens(o), Contains("signal must lie in [0, 1]"));
}
