#include "asteroid/serialization/module_state.hpp"

#include <catch2/catch.hpp>

using namespace asteroid::serialization;

TEST_CASE("module state round-trips parameters and buffers", "[module_state]") {
  torch::manual_seed(3);
  torch::nn::Sequential a(torch::nn::Linear(4, 3), torch::nn::BatchNorm1d(3));
  a->train();
  a->forward(torch::randn({8, 4})); // moves the running stats off their defaults
  auto state = capture_module_state(*a);
  CHECK(state.size() == 2 + 2 + 3); // linear w,b; bn w,b; bn mean,var,count
  CHECK(state[0].first == "0.weight");

  torch::manual_seed(4);
  torch::nn::Sequential b(torch::nn::Linear(4, 3), torch::nn::BatchNorm1d(3));
  REQUIRE_FALSE(torch::equal(a->parameters()[0], b->parameters()[0]));
  load_module_state(*b, decode_tensors(encode_tensors(state)));
  auto pa = a->named_parameters(), pb = b->named_parameters();
  for (const auto& item : pa)
    CHECK(torch::equal(item.value(), pb[item.key()]));
  auto ba = a->named_buffers(), bb = b->named_buffers();
  for (const auto& item : ba)
    CHECK(torch::equal(item.value(), bb[item.key()]));
  // The capture is a copy, not a view of the live weights.
  torch::NoGradGuard g;
  b->parameters()[0].add_(1.0);
  CHECK_FALSE(torch::equal(state[0].second, b->parameters()[0]));
}

TEST_CASE("module state mismatches are named", "[module_state][errors]") {
  torch::nn::Linear m(4, 3);
  auto state = capture_module_state(*m);
  auto before = m->weight.clone();

  auto wrong_shape = state;
  wrong_shape[0].second = torch::zeros({3, 5});
  CHECK_THROWS_WITH(load_module_state(*m, wrong_shape),
                    "module state: 'weight' has shape [3, 5] but the module expects [3, 4]");
  auto missing = state;
  missing.pop_back();
  CHECK_THROWS_WITH(load_module_state(*m, missing), "module state: missing tensor 'bias'");
  auto extra = state;
  extra.emplace_back("head.weight", torch::zeros({1}));
  CHECK_THROWS_WITH(load_module_state(*m, extra),
                    "module state: unexpected tensor 'head.weight'");
  auto dup = state;
  dup.push_back(state[0]);
  CHECK_THROWS_WITH(load_module_state(*m, dup), "module state: duplicate tensor 'weight'");
  auto integers = state;
  integers[0].second = integers[0].second.to(torch::kLong);
  CHECK_THROWS_WITH(load_module_state(*m, integers),
                    "module state: 'weight' holds Long values but the module expects Float");
  CHECK(torch::equal(m->weight, before)); // nothing half-loaded
}
