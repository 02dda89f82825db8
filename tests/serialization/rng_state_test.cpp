#include "asteroid/serialization/rng_state.hpp"

#include <catch2/catch.hpp>
#include <torch/torch.h>

using namespace asteroid::serialization;

TEST_CASE("restoring the rng state repeats the random stream", "[rng_state]") {
  torch::manual_seed(11);
  torch::randn({5});
  auto state = capture_rng_state();
  CHECK_FALSE(state.empty());
  auto a = torch::randn({100});
  auto b = torch::randperm(50);
  torch::manual_seed(999); // something else entirely in between
  torch::rand({3});
  restore_rng_state(state);
  CHECK(torch::equal(torch::randn({100}), a));
  CHECK(torch::equal(torch::randperm(50), b));
  CHECK(capture_rng_state() != state); // it advanced
}

TEST_CASE("a malformed rng state is rejected", "[rng_state][errors]") {
  CHECK_THROWS_AS(restore_rng_state("too short"), std::invalid_argument);
  CHECK_THROWS_WITH(restore_rng_state(""), Catch::StartsWith("rng state of 0 bytes rejected"));
}
