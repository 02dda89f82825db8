#include "asteroid/models/zoo.hpp"

#include <catch2/catch.hpp>

using namespace asteroid::models;

TEST_CASE("models: model_names lists every zoo model", "[models][zoo]") {
  std::vector<std::string> expected{"mlp",          "cnn",        "cnn_bn",
                                    "mobilenet_v2", "resnet18",   "resnet50",
                                    "efficientnet_b1", "bert_small", "bert_tiny",
                                    "bert_base",    "vit",        "vit_tiny",
                                    "vit_large"};
  CHECK(model_names() == expected);
}

TEST_CASE("models: make_model rejects an unknown name and lists the known ones",
          "[models][zoo]") {
  try {
    make_model("resnet19");
    FAIL("no exception");
  } catch (const std::invalid_argument& e) {
    std::string what = e.what();
    CHECK_THAT(what, Catch::Contains("unknown model 'resnet19'"));
    for (const auto& name : model_names())
      CHECK_THAT(what, Catch::Contains(name));
  }
}

TEST_CASE("models: make_model names the invalid option", "[models][zoo]") {
  CHECK_THROWS_WITH(make_model("cnn", model_options().num_classes(0)),
                    Catch::Contains("make_model(cnn): option num_classes must be "
                                    "positive, got 0"));
  CHECK_THROWS_WITH(make_model("cnn", model_options().image_size(3)),
                    Catch::Contains("make_model(cnn): option image_size must be >= 4"));
  CHECK_THROWS_WITH(make_model("resnet18", model_options().width_mult(0)),
                    Catch::Contains("make_model(resnet18): option width_mult"));
  CHECK_THROWS_WITH(make_model("vit", model_options().image_size(30)),
                    Catch::Contains("make_model(vit): option image_size 30 is not a "
                                    "multiple of patch_size 16"));
  CHECK_THROWS_WITH(make_model("bert_tiny", model_options().seq_len(513)),
                    Catch::Contains("make_model(bert_tiny): option seq_len must be <= "
                                    "512, got 513"));
  CHECK_THROWS_WITH(make_model("bert_tiny", model_options().num_heads(3)),
                    Catch::Contains("option num_heads 3 does not divide hidden_dim 128"));
  CHECK_THROWS_WITH(make_model("mlp", model_options().hidden_sizes({})),
                    Catch::Contains("make_model(mlp): option hidden_sizes must not be "
                                    "empty"));
  CHECK_THROWS_WITH(make_model("mobilenet_v2", model_options().dropout(1.0)),
                    Catch::Contains("make_model(mobilenet_v2): option dropout must be < 1"));
}

namespace {

bool same_state(sequential_model a, sequential_model b) {
  auto sa = a->range_state(0, -1);
  auto sb = b->range_state(0, -1);
  if (sa.size() != sb.size())
    return false;
  for (size_t i = 0; i < sa.size(); ++i)
    if (sa[i].first != sb[i].first || !torch::equal(sa[i].second, sb[i].second))
      return false;
  return true;
}

} // namespace

TEST_CASE("models: initialisation is a function of the seed", "[models][zoo]") {
  for (const char* name : {"cnn", "resnet18", "bert_tiny", "vit_tiny"}) {
    INFO(name);
    auto opts = model_options().seed(7).image_size(32).seq_len(8);
    auto a = make_model(name, opts);
    auto b = make_model(name, opts);
    CHECK(same_state(a, b));
    CHECK_FALSE(same_state(a, make_model(name, opts.seed(8))));
    torch::manual_seed(7);
    auto c = make_model(name, model_options().image_size(32).seq_len(8));
    CHECK(same_state(a, c));
  }
}

TEST_CASE("models: the default inputs match the documented table", "[models][zoo]") {
  CHECK(make_model("mlp")->input_shape() == shape_t{1, 28, 28});
  CHECK(make_model("cnn")->input_shape() == shape_t{1, 28, 28});
  CHECK(make_model("mobilenet_v2")->input_shape() == shape_t{3, 32, 32});
  CHECK(make_model("resnet18")->input_shape() == shape_t{3, 32, 32});
  auto bert = make_model("bert_tiny");
  CHECK(bert->input_shape() == shape_t{128});
  CHECK(bert->input_dtype() == torch::kLong);
  CHECK(make_model("vit_tiny")->input_shape() == shape_t{3, 224, 224});
  CHECK(make_model("cnn")->output_shape() == shape_t{10});
}
