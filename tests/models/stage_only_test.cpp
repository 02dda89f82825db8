// Stage-only models: a model that builds a range of its layers knows every
// layer's name and shapes but constructs, allocates and initialises only the
// layers of its range, and those compute exactly as in the whole model.
#include "asteroid/models/zoo.hpp"

#include <catch2/catch.hpp>

#include <utility>

using namespace asteroid::models;

namespace {

int64_t held_scalars(const sequential_model& m) {
  int64_t n = 0;
  for (const auto& p : m->parameters())
    n += p.numel();
  for (const auto& b : m->buffers())
    n += b.numel();
  return n;
}

/// Builds layers [first, end) of `name` and checks them against the whole
/// model built from the same seed.
void check_stage(const std::string& name, model_options options, int first,
                 int end) {
  CAPTURE(name, first, end);
  auto whole = make_model(name, model_options(options).seed(7));
  auto stage = make_model(name, model_options(options).seed(7).build_layers({first, end}));
  REQUIRE(stage->size() == whole->size());
  for (int i = 0; i < whole->size(); ++i) {
    CAPTURE(i);
    CHECK(stage->layer_name(i) == whole->layer_name(i));
    CHECK(stage->input_shape(i) == whole->input_shape(i));
    CHECK(stage->output_shape(i) == whole->output_shape(i));
    CHECK(stage->is_built(i) == (i >= first && i < end));
  }
  // Nothing outside the range is held: every tensor the stage owns is one
  // of its layers'.
  int64_t range_scalars = 0;
  for (const auto& [n, t] : whole->range_state(first, end))
    range_scalars += t.numel();
  CHECK(held_scalars(stage) == range_scalars);
  CHECK(stage->parameter_count(first, end) == whole->parameter_count(first, end));

  // The same state gives the same outputs.
  stage->load_range_state(first, end, whole->range_state(first, end));
  whole->eval();
  stage->eval();
  torch::NoGradGuard no_grad;
  shape_t batch{2};
  auto in = whole->input_shape(first);
  batch.insert(batch.end(), in.begin(), in.end());
  auto x = first == 0 && whole->input_dtype() == torch::kLong
             ? torch::randint(0, 100, batch, torch::kLong)
             : torch::randn(batch);
  CHECK(torch::equal(stage->forward_range(x, first, end),
                     whole->forward_range(x, first, end)));
}

} // namespace

TEST_CASE("models: a stage-only model builds exactly its layers, which compute "
          "as in the whole model", "[models][stage_only]") {
  const std::vector<std::pair<std::string, model_options>> models{
    {"mlp", model_options()},
    {"cnn_bn", model_options()},
    {"resnet18", model_options()},
    {"mobilenet_v2", model_options()},
    {"efficientnet_b1", model_options()},
    {"bert_tiny", model_options().seq_len(16).vocab_size(100)},
    {"vit_tiny", model_options().image_size(32).patch_size(8)},
  };
  for (const auto& [name, options] : models) {
    auto L = static_cast<int>(make_model(name, options)->size());
    check_stage(name, options, 0, 2);
    check_stage(name, options, L / 2, L / 2 + 1);
    check_stage(name, options, L - 2, L);
  }
}

TEST_CASE("models: the last two layers of ResNet-50 at 224 hold only their own "
          "parameters", "[models][stage_only]") {
  auto options = model_options().num_classes(1000).image_size(224);
  auto stage = make_model("resnet50", model_options(options).build_layers({16, 18}));
  REQUIRE(stage->size() == 18); // stem, 16 bottlenecks, head
  int64_t held = 0;
  for (const auto& p : stage->parameters())
    held += p.numel();
  CHECK(held == stage->parameter_count(16, 18));
  // layer4_2 (4,462,592) and the head (2,049,000) of 25,557,032 in all.
  CHECK(held == 4462592 + 2049000);
}

TEST_CASE("models: a stage-only model names the layer it does not build",
          "[models][stage_only]") {
  auto stage = make_model("mlp", model_options().build_layers({1, 3}));
  REQUIRE(stage->size() == 3);
  CHECK_THROWS_AS(stage->range_state(0, 2), std::logic_error);
  CHECK_THROWS_WITH(stage->range_parameters(0, 1),
                    Catch::Contains("layer 'fc1' (0) is not built here")
                      && Catch::Contains("builds layers [1, 3)"));
  CHECK_THROWS_WITH(stage->layer_module(0), Catch::Contains("'fc1'"));
  CHECK_THROWS_WITH(stage->forward(torch::zeros({1, 1, 28, 28})),
                    Catch::Contains("'fc1'"));
  CHECK_THROWS_AS(stage->check_shapes(), std::logic_error);
  CHECK_NOTHROW(stage->range_state(1, 3));
  CHECK_THROWS_WITH(make_model("mlp", model_options().build_layers({2, 2})),
                    Catch::Contains("not a non-empty range"));
}
