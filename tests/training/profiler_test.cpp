#include <catch2/catch.hpp>

#include "asteroid/models/zoo.hpp"
#include "asteroid/planner/cost_model.hpp"
#include "asteroid/training/memory_tracker.hpp"
#include "asteroid/training/profiler.hpp"

#include <c10/core/CPUAllocator.h>

using namespace asteroid;

TEST_CASE("the memory tracker sees LibTorch allocations", "[training][profiler]") {
  training::memory_tracker m;
  auto before = m.current_bytes();
  m.reset_peak();
  {
    auto t = torch::empty({1024, 1024}); // 4 MiB
    CHECK(m.current_bytes() - before >= 4 * 1024 * 1024);
  }
  CHECK(m.current_bytes() - before < 4 * 1024 * 1024);
  CHECK(m.peak_bytes() - before >= 4 * 1024 * 1024);
}

TEST_CASE("profiling an MLP measures every layer", "[training][profiler]") {
  auto model = models::make_model(
    "mlp", models::model_options().hidden_sizes({256, 128}).seed(1));
  training::profiler_options o;
  o.batch_sizes = {1, 16};
  o.repeats = 3;
  std::vector<torch::Tensor> weights;
  for (auto& w : model->parameters())
    weights.push_back(w.detach().clone());
  auto p = training::profile_model(model, "mlp", o);
  REQUIRE(p.num_layers() == model->size());
  CHECK(p.model == "mlp");
  // Timing the optimizer's step put the weights back.
  auto now = model->parameters();
  REQUIRE(now.size() == weights.size());
  for (size_t k = 0; k < now.size(); ++k) {
    CHECK(torch::equal(now[k], weights[k]));
    CHECK_FALSE(now[k].grad().defined());
  }
  CHECK(p.input_bytes_per_sample == 28 * 28 * 4);
  int64_t params = 0;
  for (int i = 0; i < p.num_layers(); ++i) {
    auto& l = p.layers[i];
    CHECK(l.name == model->layer_name(i));
    REQUIRE(l.batch_sizes == std::vector<int64_t>{1, 16});
    for (size_t k = 0; k < 2; ++k) {
      CHECK(l.forward_s[k] > 0);
      CHECK(l.backward_s[k] > 0);
    }
    int64_t out = 4;
    for (auto d : model->output_shape(i))
      out *= d;
    CHECK(l.output_bytes_per_sample == out);
    CHECK(l.optimizer_state_bytes * 1 == l.param_bytes); // SGD: one buffer
    // Once per step, where there are weights to update.
    CHECK((l.optimizer_step_s > 0) == (l.param_bytes > 0));
    params += l.param_bytes;
  }
  CHECK(params == model->parameter_count() * 4);
}

TEST_CASE("an inference profile times forward passes alone, without autograd",
          "[training][profiler]") {
  // A transformer: its blocks' intermediates (a norm's output, GELU's
  // input) are what autograd would keep beyond a layer's output.
  auto model = models::make_model("vit_tiny",
                                  models::model_options().image_size(32).patch_size(8).seed(1));
  training::profiler_options o;
  o.batch_sizes = {4};
  o.repeats = 2;
  o.warmup = 1;
  o.forward_only = true;
  auto p = training::profile_model(model, "vit_tiny", o);
  REQUIRE(p.num_layers() == model->size());
  for (int i = 0; i < p.num_layers(); ++i) {
    const auto& l = p.layers[static_cast<size_t>(i)];
    INFO(l.name);
    REQUIRE(l.batch_sizes == std::vector<int64_t>{4});
    CHECK(l.forward_s[0] > 0);
    CHECK(l.backward_s[0] == 0);
    CHECK(l.optimizer_step_s == 0); // nothing is trained
    CHECK(l.stashed_bytes_per_sample == 0); // autograd kept nothing beyond the output
    int64_t out = 4;
    for (auto d : model->output_shape(i))
      out *= d;
    CHECK(l.output_bytes_per_sample == out);
  }
  // Left as a stage would be: eval mode.
  CHECK_FALSE(model->is_training());
  // Training forwards keep what the backward needs: a stash beyond the outputs.
  o.forward_only = false;
  auto trained = training::profile_model(model, "vit_tiny", o);
  CHECK(model->is_training());
  int64_t stash = 0, outputs = 0;
  for (auto& l : trained.layers) {
    stash += l.stashed_bytes_per_sample;
    outputs += l.output_bytes_per_sample;
  }
  CHECK(stash > outputs);
}

TEST_CASE("an emulated slowdown is recorded and scales times",
          "[training][profiler]") {
  auto model = models::make_model("mlp", models::model_options().seed(1));
  training::profiler_options o;
  o.batch_sizes = {8};
  o.slowdown = 1000.0;
  o.device = "nano";
  auto p = training::profile_model(model, "mlp", o);
  CHECK(p.device == "nano (emulated slowdown x1000)");
  // No real layer this small takes 1 ms per forward pass, but 1000x does.
  double total = 0;
  for (auto& l : p.layers)
    total += l.forward_s[0];
  CHECK(total > 1e-3);
}

TEST_CASE("bad profiler options are named", "[training][profiler][errors]") {
  auto model = models::make_model("mlp");
  training::profiler_options o;
  o.batch_sizes = {8, 4};
  CHECK_THROWS_WITH(training::profile_model(model, "mlp", o),
                    Catch::Contains("ascending"));
  o.batch_sizes = {};
  CHECK_THROWS_WITH(training::profile_model(model, "mlp", o),
                    Catch::Contains("no batch sizes"));
}

TEST_CASE("the tracked allocator keeps LibTorch's raw interface working",
          "[training][profiler]") {
  training::memory_tracker m;
  auto* alloc = c10::GetCPUAllocator();
  auto before = m.current_bytes();
  void* p = alloc->raw_allocate(1 << 20);
  REQUIRE(p != nullptr);
  CHECK(m.current_bytes() - before >= (1 << 20));
  alloc->raw_deallocate(p);
  CHECK(m.current_bytes() - before < (1 << 20));
}

TEST_CASE("profiling the CNN (convolutions) measures every layer",
          "[training][profiler]") {
  auto model = models::make_model("cnn", models::model_options().seed(1));
  training::profiler_options o;
  o.batch_sizes = {2, 4};
  o.warmup = 1;
  o.repeats = 1;
  auto p = training::profile_model(model, "cnn", o);
  REQUIRE(p.num_layers() == model->size());
  for (auto& l : p.layers)
    CHECK(l.forward_s[1] > 0);
}

TEST_CASE("a profile predicts the tensors a training step holds at its peak",
          "[training][profiler][memory]") {
  // The cost model's memory for the whole cnn as one stage with one
  // micro-batch in flight, against LibTorch's allocator during real steps
  // (SGD with momentum, as profiled): weights, gradients, momentum, the
  // stash autograd keeps and backward's working memory. Before the profile
  // measured stashes, the prediction was a fraction of the peak.
  const int64_t batch = 16;
  auto probe = models::make_model("cnn", models::model_options().seed(1));
  training::profiler_options o;
  o.batch_sizes = {1, batch};
  o.warmup = 1;
  o.repeats = 1;
  auto profile = training::profile_model(probe, "cnn", o);
  for (auto& l : profile.layers)
    CHECK(l.stashed_bytes_per_sample >= l.output_bytes_per_sample);
  planner::cost_tables tables(profile, batch);
  const auto predicted = tables.memory_bytes(0, profile.num_layers(), batch, 1);

  training::memory_tracker memory;
  const auto before = memory.current_bytes();
  memory.reset_peak();
  auto model = models::make_model("cnn", models::model_options().seed(2));
  auto params = model->range_parameters(0, model->size());
  torch::optim::SGD sgd(params, torch::optim::SGDOptions(0.01).momentum(0.9));
  for (int step = 0; step < 2; ++step) {
    auto x = torch::randn({batch, 1, 28, 28});
    auto y = torch::randint(0, 10, {batch});
    sgd.zero_grad();
    auto loss = torch::nn::functional::cross_entropy(
      model->forward_range(x, 0, model->size()), y);
    loss.backward();
    sgd.step();
  }
  const auto measured = memory.peak_bytes() - before;
  INFO("predicted " << predicted << " B, measured " << measured << " B");
  CHECK(static_cast<double>(measured) >= 0.85 * static_cast<double>(predicted));
  CHECK(static_cast<double>(measured) <= 1.15 * static_cast<double>(predicted));
}
