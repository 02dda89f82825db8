// Models by name: a replica asks for its stage's layers only.
#include "asteroid/training/model_registry.hpp"

#include <catch2/catch.hpp>

using namespace asteroid;
using nlohmann::json;

namespace {

int64_t held_parameters(const models::sequential_model& m) {
  int64_t n = 0;
  for (const auto& p : m->parameters())
    n += p.numel();
  return n;
}

models::sequential_model three_linears(const json&) {
  models::sequential_model m(models::shape_t{4});
  m->push_back("a", torch::nn::AnyModule(torch::nn::Linear(4, 8)), {8});
  m->push_back("b", torch::nn::AnyModule(torch::nn::Linear(8, 8)), {8});
  m->push_back("c", torch::nn::AnyModule(torch::nn::Linear(8, 2)), {2});
  return m;
}

} // namespace

TEST_CASE("model registry: a zoo model is built for the range asked",
          "[training][model_registry]") {
  auto stage = training::build_model("cnn", json::object(), {2, 4});
  CHECK(stage->size() == 4);
  CHECK_FALSE(stage->is_built(0));
  CHECK(stage->is_built(3));
  CHECK(held_parameters(stage) == stage->parameter_count(2, 4));
}

TEST_CASE("model registry: a ranged factory gets the range, and an options-only "
          "factory's other layers are dropped", "[training][model_registry]") {
  models::layer_range seen{-5, -5};
  training::register_model_factory(
    "test_ranged_linears",
    training::ranged_model_factory{[&](const json& o, const models::layer_range& r) {
      seen = r;
      auto whole = three_linears(o);
      models::sequential_model m(whole->input_shape(), torch::kFloat, r);
      for (int i = 0; i < 3; ++i)
        m->push_back(whole->layer_name(i),
                     [&, i] { return whole->at(i).module; },
                     whole->output_shape(i));
      return m;
    }});
  auto ranged = training::build_model("test_ranged_linears", json::object(), {1, 2});
  CHECK(seen.first == 1);
  CHECK(seen.end == 2);
  CHECK(held_parameters(ranged) == 8 * 8 + 8);

  training::register_model_factory("test_plain_linears",
                                   training::model_factory{&three_linears});
  auto plain = training::build_model("test_plain_linears", json::object(), {1, 3});
  REQUIRE(plain->size() == 3);
  CHECK(plain->layer_name(0) == "a");
  CHECK_FALSE(plain->is_built(0));
  CHECK(plain->output_shape(0) == models::shape_t{8});
  CHECK(held_parameters(plain) == (8 * 8 + 8) + (8 * 2 + 2));
  auto whole = training::build_model("test_plain_linears", json::object());
  CHECK(held_parameters(whole) == (4 * 8 + 8) + (8 * 8 + 8) + (8 * 2 + 2));
}
