// Transformer sub-layers as pipeline layers (model_options::sub_layers): the
// same parameters and the same function as the whole encoder blocks.
#include "asteroid/models/zoo.hpp"

#include <catch2/catch.hpp>

#include <map>
#include <regex>

using namespace asteroid::models;

namespace {

/// Loads the whole-block model's weights into the split one: every split
/// tensor "encoder<i>_attention.<t>" or "encoder<i>_mlp.<t>" is the whole
/// model's "encoder<i>.<t>".
void copy_into_split(const sequential_model& whole, sequential_model& split) {
  std::map<std::string, torch::Tensor> by_name;
  for (auto& [name, t] : whole->range_state(0, -1))
    by_name[name] = t;
  const std::regex part{R"(^(encoder\d+)_(attention|mlp)\.)"};
  named_tensors state;
  for (auto& [name, t] : split->range_state(0, -1)) {
    auto mapped = std::regex_replace(name, part, "$1.");
    REQUIRE(by_name.count(mapped));
    state.emplace_back(name, by_name[mapped]);
  }
  split->load_range_state(0, -1, state);
}

} // namespace

TEST_CASE("models: ViT and BERT split into attention and MLP sub-layers compute "
          "what their whole blocks compute", "[models][sub_layers]") {
  for (const char* name : {"vit_tiny", "bert_tiny"}) {
    CAPTURE(name);
    auto o = model_options().image_size(32).patch_size(8).seq_len(16).vocab_size(100)
               .num_layers(3).seed(4);
    auto whole = make_model(name, o);
    auto split = make_model(name, model_options(o).sub_layers(true));
    // Every block becomes two layers; nothing else changes.
    CHECK(split->size() == whole->size() + 3);
    CHECK(split->layer_name(1) == "encoder0_attention");
    CHECK(split->layer_name(2) == "encoder0_mlp");
    CHECK(split->parameter_count() == whole->parameter_count());
    copy_into_split(whole, split);
    whole->eval();
    split->eval();
    torch::NoGradGuard no_grad;
    auto x = std::string(name) == "bert_tiny" ? torch::randint(0, 100, {2, 16}, torch::kLong)
                                              : torch::randn({2, 3, 32, 32});
    CHECK(torch::allclose(split->forward(x), whole->forward(x), 1e-6, 1e-6));
    // The sub-layers are real cut points: a pipeline over them composes.
    auto mid = split->forward_range(x, 0, 2);
    CHECK(torch::allclose(split->forward_range(mid, 2, -1), whole->forward(x), 1e-6, 1e-6));
  }
}

TEST_CASE("models: ViT-L/16 in sub-layers is EdgePipe's 50 units", "[models][sub_layers]") {
  auto head_only = make_model("vit_large", model_options().num_classes(1000).sub_layers(true)
                                             .build_layers({49, 50}));
  CHECK(head_only->size() == 50); // patch embedding, 24 x (attention, MLP), head
  CHECK(head_only->layer_name(48) == "encoder23_mlp");
  CHECK(head_only->parameter_count(49, 50) == 1024 * 2 + 1024 * 1000 + 1000);
}
