#include "asteroid/models/chain.hpp"
#include "asteroid/models/sequential_model.hpp"

#include <catch2/catch.hpp>

#include <algorithm>

using namespace asteroid::models;
namespace nn = torch::nn;

namespace {

/// A 3-layer model with a BatchNorm (for buffers) built by hand.
sequential_model small_model() {
  sequential_model m(shape_t{1, 8, 8});
  m->push_back("conv",
               nn::AnyModule(chain(
                 nn::Conv2d(nn::Conv2dOptions(1, 4, 3).padding(1)),
                 nn::BatchNorm2d(4), nn::ReLU())),
               {4, 8, 8});
  m->push_back("flatten", nn::AnyModule(nn::Flatten()), {256});
  m->push_back("fc", nn::AnyModule(nn::Linear(256, 3)), {3});
  return m;
}

std::vector<std::string> names_of(const named_tensors& state) {
  std::vector<std::string> names;
  for (const auto& [name, t] : state)
    names.push_back(name);
  return names;
}

} // namespace

TEST_CASE("models: sequential_model exposes layer names and per-sample shapes",
          "[models][sequential_model]") {
  auto m = small_model();
  REQUIRE(m->size() == 3);
  CHECK(m->layer_name(0) == "conv");
  CHECK(m->layer_name(2) == "fc");
  CHECK(m->index_of("flatten") == 1);
  CHECK(m->input_shape() == shape_t{1, 8, 8});
  CHECK(m->input_shape(0) == shape_t{1, 8, 8});
  CHECK(m->output_shape(0) == shape_t{4, 8, 8});
  CHECK(m->input_shape(1) == shape_t{4, 8, 8});
  CHECK(m->input_shape(2) == shape_t{256});
  CHECK(m->output_shape(2) == shape_t{3});
  CHECK(m->output_shape() == shape_t{3});
  CHECK(m->input_dtype() == torch::kFloat);
  CHECK_THROWS_WITH(m->layer_name(3), Catch::Contains("layer index 3 out of range [0, 3)"));
  CHECK_THROWS_WITH(m->index_of("nope"), Catch::Contains("no layer named 'nope'"));
  CHECK_NOTHROW(m->check_shapes(2));
}

TEST_CASE("models: sequential_model rejects bad layer names", "[models][sequential_model]") {
  sequential_model m(shape_t{4});
  m->push_back("a", nn::AnyModule(nn::Linear(4, 4)), {4});
  CHECK_THROWS_WITH(m->push_back("a", nn::AnyModule(nn::Linear(4, 4)), {4}),
                    Catch::Contains("duplicate layer name 'a'"));
  CHECK_THROWS_WITH(m->push_back("b.c", nn::AnyModule(nn::Linear(4, 4)), {4}),
                    Catch::Contains("'b.c' contains '.'"));
  CHECK_THROWS_WITH(m->push_back("", nn::AnyModule(nn::Linear(4, 4)), {4}),
                    Catch::Contains("layer name is empty"));
  CHECK(m->size() == 1);
}

TEST_CASE("models: sequential_model infers output shapes by a dry run",
          "[models][sequential_model]") {
  sequential_model m(shape_t{2, 6, 6});
  m->push_back("pool", nn::AnyModule(nn::MaxPool2d(nn::MaxPool2dOptions(2))));
  m->push_back("flatten", nn::AnyModule(nn::Flatten()));
  CHECK(m->output_shape(0) == shape_t{2, 3, 3});
  CHECK(m->output_shape(1) == shape_t{18});
  CHECK_THROWS_WITH(m->push_back("fc", nn::AnyModule(nn::Linear(5, 2))),
                    Catch::Contains("layer 'fc' rejects input of shape [18]"));
}

TEST_CASE("models: check_shapes names the layer whose declared shape is wrong",
          "[models][sequential_model]") {
  sequential_model m(shape_t{4});
  m->push_back("fc1", nn::AnyModule(nn::Linear(4, 5)), {5});
  m->push_back("fc2", nn::AnyModule(nn::Linear(5, 2)), {3});  // wrong: 2
  m->train();
  CHECK_THROWS_WITH(m->check_shapes(2),
                    Catch::Contains("layer 'fc2' produces [2, 2], declared per-sample "
                                    "output [3]"));
  CHECK(m->is_training());  // restored after the eval-mode dry run
}

TEST_CASE("models: forward_range composes to forward at every cut",
          "[models][sequential_model]") {
  torch::manual_seed(0);
  auto m = small_model();
  m->eval();
  auto x = torch::randn({2, 1, 8, 8});
  auto y = m->forward(x);
  REQUIRE(y.sizes() == torch::IntArrayRef({2, 3}));
  for (int cut = 0; cut <= 3; ++cut) {
    auto mid = m->forward_range(x, 0, cut);
    CHECK(torch::equal(m->forward_range(mid, cut, 3), y));
  }
  CHECK(torch::equal(m->forward_range(x, 0, -1), y));
  CHECK(torch::equal(m->forward_range(x, 1, 1), x));  // empty range is identity
  CHECK_THROWS_WITH(m->forward_range(x, 2, 1), Catch::Contains("bad layer range [2, 1)"));
  CHECK_THROWS_WITH(m->forward_range(x, 0, 4), Catch::Contains("bad layer range [0, 4)"));
}

TEST_CASE("models: range_parameters and parameter_count cover exactly the range",
          "[models][sequential_model]") {
  auto m = small_model();
  // conv 1*4*9 + 4, BatchNorm 4 + 4, fc 256*3 + 3.
  CHECK(m->parameter_count() == 40 + 8 + 771);
  CHECK(m->parameter_count(0, 1) == 48);
  CHECK(m->parameter_count(1, 2) == 0);
  CHECK(m->parameter_count(1, 3) == 771);
  CHECK(m->range_parameters(0, 1).size() == 4);
  CHECK(m->range_parameters(2, 3).size() == 2);
  CHECK(m->range_parameters(0, -1).size() == m->parameters().size());
}

TEST_CASE("models: range_state names parameters and buffers by layer",
          "[models][sequential_model]") {
  auto m = small_model();
  auto names = names_of(m->range_state(0, 1));
  std::vector<std::string> expected{"conv.0.weight",       "conv.0.bias",
                                    "conv.1.weight",       "conv.1.bias",
                                    "conv.1.running_mean", "conv.1.running_var",
                                    "conv.1.num_batches_tracked"};
  CHECK(names == expected);
  CHECK(names_of(m->range_state(2, 3)) == std::vector<std::string>{"fc.weight", "fc.bias"});
  CHECK(m->range_state(1, 2).empty());
  CHECK(m->range_state(0, -1).size() == 9);
}

TEST_CASE("models: load_range_state round-trips between two models",
          "[models][sequential_model]") {
  torch::manual_seed(1);
  auto a = small_model();
  torch::manual_seed(2);
  auto b = small_model();
  // Make the BatchNorm statistics differ too.
  a->train();
  a->forward(torch::randn({4, 1, 8, 8}));
  a->eval();
  b->eval();
  auto x = torch::randn({2, 1, 8, 8});
  REQUIRE_FALSE(torch::equal(a->forward(x), b->forward(x)));

  // Load in reverse order: names, not positions, decide.
  auto state = a->range_state(0, 3);
  std::reverse(state.begin(), state.end());
  b->load_range_state(0, 3, state);
  CHECK(torch::equal(a->forward(x), b->forward(x)));
  auto bs = b->range_state(0, 3);
  auto as = a->range_state(0, 3);
  for (size_t i = 0; i < as.size(); ++i) {
    CHECK(as[i].first == bs[i].first);
    CHECK(torch::equal(as[i].second, bs[i].second));
    CHECK(as[i].second.data_ptr() != bs[i].second.data_ptr());  // copied
  }
}

TEST_CASE("models: load_range_state reports the offending tensor and changes nothing",
          "[models][sequential_model]") {
  torch::manual_seed(3);
  auto m = small_model();
  auto before = m->range_state(0, 3);
  std::vector<torch::Tensor> saved;
  for (const auto& [name, t] : before)
    saved.push_back(t.clone());

  SECTION("wrong shape") {
    auto state = m->range_state(0, 3);
    for (auto& [name, t] : state)
      t = t.clone().zero_();
    state.back().second = torch::zeros({4});  // fc.bias is [3]
    CHECK_THROWS_WITH(m->load_range_state(0, 3, state),
                      Catch::Contains("tensor 'fc.bias' has shape [4], expected [3]"));
  }
  SECTION("missing tensor") {
    auto state = m->range_state(0, 3);
    state.erase(state.begin() + 4);  // conv.1.running_mean
    CHECK_THROWS_WITH(m->load_range_state(0, 3, state),
                      Catch::Contains("tensor 'conv.1.running_mean' of layers [0, 3) is "
                                      "missing"));
  }
  SECTION("unexpected tensor") {
    auto state = m->range_state(2, 3);
    state.emplace_back("conv.0.weight", torch::zeros({4, 1, 3, 3}));
    CHECK_THROWS_WITH(m->load_range_state(2, 3, state),
                      Catch::Contains("unexpected tensor 'conv.0.weight' for layers [2, 3)"));
  }
  SECTION("duplicate tensor") {
    auto state = m->range_state(2, 3);
    state.push_back(state.front());
    CHECK_THROWS_WITH(m->load_range_state(2, 3, state),
                      Catch::Contains("tensor 'fc.weight' appears twice"));
  }
  auto after = m->range_state(0, 3);
  for (size_t i = 0; i < after.size(); ++i)
    CHECK(torch::equal(after[i].second, saved[i]));
}
