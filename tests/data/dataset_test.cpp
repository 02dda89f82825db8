#include <catch2/catch.hpp>

#include "asteroid/data/data_error.hpp"
#include "asteroid/data/dataset.hpp"
#include "asteroid/data/make_dataset.hpp"
#include "asteroid/data/split.hpp"

using namespace asteroid::data;
using Catch::Matchers::Contains;

namespace {

tensor_dataset small_set() {
  // Sample i is a 2x3 tensor filled with i; its target is i % 4.
  auto inputs = torch::arange(10, torch::kFloat32).view({10, 1, 1}).expand({10, 2, 3});
  return tensor_dataset(inputs, torch::arange(10, torch::kInt64).remainder(4), 4, "small");
}

} // namespace

TEST_CASE("data: tensor_dataset gathers batches by index", "[data][dataset]") {
  auto d = small_set();
  REQUIRE(d.size() == 10);
  CHECK(d.sample_shape() == std::vector<int64_t>{2, 3});
  CHECK(d.num_classes() == 4);

  auto b = d.get_batch({7, 2, 2, 9});
  REQUIRE(b.size() == 4);
  CHECK(b.inputs.sizes() == torch::IntArrayRef{4, 2, 3});
  CHECK(b.inputs[0][1][2].item<float>() == 7);
  CHECK(b.inputs[2][0][0].item<float>() == 2);
  CHECK(b.targets[0].item<int64_t>() == 3);
  CHECK(b.targets[3].item<int64_t>() == 1);
  CHECK(d.get_batch({}).size() == 0);

  auto r = d.get_range(3, 6);
  CHECK(r.size() == 3);
  CHECK(r.inputs[0][0][0].item<float>() == 3);
  CHECK(r.inputs.data_ptr<float>() == d.inputs().data_ptr<float>() + 3 * 6); // a view

  auto e = d.get(5);
  CHECK(e.input.sizes() == torch::IntArrayRef{2, 3});
  CHECK(e.input[1][1].item<float>() == 5);
  CHECK(e.target.item<int64_t>() == 1);
}

TEST_CASE("data: tensor_dataset rejects bad indices and bad tensors", "[data][dataset]") {
  auto d = small_set();
  CHECK_THROWS_WITH(d.get_batch({1, 10}),
                    Contains("small: index 10 (position 1 of the batch) is outside [0, 10)"));
  CHECK_THROWS_AS(d.get_batch({-1}), std::out_of_range);
  CHECK_THROWS_AS(d.get(10), std::out_of_range);
  CHECK_THROWS_WITH(d.get_range(4, 11), Contains("range [4, 11) is not inside [0, 10)"));

  CHECK_THROWS_WITH(tensor_dataset(torch::zeros({3, 2}), torch::zeros({4}, torch::kInt64), 2, "x"),
                    Contains("x: 3 inputs but 4 targets"));
  CHECK_THROWS_WITH(tensor_dataset(torch::zeros({3, 2}), torch::zeros({3}), 2, "x"),
                    Contains("1-D int64"));
  CHECK_THROWS_WITH(
    tensor_dataset(torch::zeros({3, 2}), torch::tensor({0, 1, 2}, torch::kInt64), 2, "x"),
    Contains("targets span [0, 2], outside [0, 2)"));
}

TEST_CASE("data: make_dataset builds each known dataset", "[data][factory]") {
  CHECK(known_datasets() ==
        std::vector<std::string>{"fashion-mnist", "cifar10", "synthetic-images",
                                 "synthetic-tokens"});

  dataset_options o;
  o.count = 40;
  o.shape = {3, 4, 4};
  o.num_classes = 5;
  o.seed = 3;
  auto images = make_dataset("synthetic-images", o);
  CHECK(images->size() == 40);
  CHECK(images->sample_shape() == std::vector<int64_t>{3, 4, 4});
  CHECK(images->num_classes() == 5);
  // Train and test splits are different draws.
  auto test_opts = o;
  test_opts.split = split::test;
  auto test_images = make_dataset("synthetic-images", test_opts);
  CHECK_FALSE(torch::equal(images->get_range(0, 40).inputs, test_images->get_range(0, 40).inputs));

  o.length = 12;
  o.vocab = 30;
  auto tokens = make_dataset("synthetic-tokens", o);
  CHECK(tokens->sample_shape() == std::vector<int64_t>{12});
  CHECK(tokens->get(0).input.scalar_type() == torch::kInt64);

  auto fashion = make_dataset("fashion-mnist", dataset_options{});
  CHECK(fashion->size() == 60000);
  test_opts = {};
  test_opts.split = split::test;
  CHECK(make_dataset("fashion-mnist", test_opts)->name() == "fashion-mnist/test");

  dataset_options cifar;
  cifar.path = "/nonexistent-cifar";
  CHECK_THROWS_WITH(make_dataset("cifar10", cifar),
                    Contains("/nonexistent-cifar/data_batch_1.bin: no such file"));
}

TEST_CASE("data: make_dataset lists the known names for an unknown one", "[data][factory]") {
  CHECK_THROWS_WITH(make_dataset("mnist"),
                    Contains("unknown dataset 'mnist'; known datasets: fashion-mnist, cifar10, "
                             "synthetic-images, synthetic-tokens"));
  CHECK_THROWS_AS(make_dataset(""), data_error);
}

TEST_CASE("data: Split names parse", "[data][split]") {
  CHECK(parse_split("train") == split::train);
  CHECK(parse_split("test") == split::test);
  CHECK(std::string(to_string(split::test)) == "test");
  CHECK_THROWS_WITH(parse_split("val"),
                    Contains("unknown split 'val', expected 'train' or 'test'"));
}
