#include <catch2/catch.hpp>

#include "asteroid/planner/analytic_profiles.hpp"
#include "asteroid/planner/device_catalog.hpp"
#include "asteroid/planner/error.hpp"

using namespace asteroid::planner;

namespace {

int64_t total_params(const model_profile& p) {
  int64_t s = 0;
  for (const auto& l : p.layers)
    s += l.param_bytes;
  return s;
}

double seconds_per_sample(const model_profile& p, double batch) {
  double t = 0;
  for (const auto& l : p.layers)
    t += l.forward_time(batch) + l.backward_time(batch);
  return t / batch;
}

} // namespace

TEST_CASE("analytic ResNet-50 matches the known architecture", "[planner][analytic]") {
  auto p = analytic_profile("resnet50");
  CHECK(p.num_layers() == 18); // stem, 16 bottlenecks, pool+fc
  CHECK(p.input_bytes_per_sample == 3 * 224 * 224 * 4);
  // torchvision ResNet-50 with a 100-class head: 23,712,932 trainable
  // parameters, plus 53,120 BatchNorm running statistics (26,560 channels x 2).
  CHECK(total_params(p) == 4 * (23'712'932LL + 53'120));
  CHECK(p.layers[0].output_bytes_per_sample == 64 * 56 * 56 * 4);
  CHECK(p.layers.back().output_bytes_per_sample == 100 * 4);
  // ~4.1 GMACs of convolutions and fc, plus BN/ReLU/add elementwise work.
  CHECK(analytic_forward_flops("resnet50") > 8.0e9);
  CHECK(analytic_forward_flops("resnet50") < 8.6e9);
  // Calibrated: 1.14 h per 60,000-image epoch on TX2, in Nano time.
  CHECK(seconds_per_sample(p, 32) ==
        Approx(1.14 * 3600 / 60000 * device_type("jetson-tx2").speed));
}

TEST_CASE("analytic CIFAR models are calibrated to the paper's Nano epochs",
          "[planner][analytic]") {
  auto m = analytic_profile("mobilenetv2");
  CHECK(m.num_layers() == 20);
  CHECK(seconds_per_sample(m, 32) == Approx(22.0 * 60 / 50000));
  CHECK(m.layers.back().output_bytes_per_sample == 10 * 4);
  auto e = analytic_profile("efficientnet-b1");
  CHECK(e.num_layers() == 26); // stem, 23 MBConv, head, pool+fc
  CHECK(seconds_per_sample(e, 32) == Approx(26.7 * 60 / 50000));
  // Per-sample cost falls with the batch (launch overheads amortise).
  CHECK(seconds_per_sample(e, 1) > seconds_per_sample(e, 32));
}

TEST_CASE("analytic BERT-small has the expected shape", "[planner][analytic]") {
  auto b = analytic_profile("bert-small");
  CHECK(b.num_layers() == 10);
  CHECK(b.input_bytes_per_sample == 512 * 8);
  CHECK(b.layers[1].output_bytes_per_sample == 512 * 512 * 4);
  // Adam keeps two moments per parameter.
  CHECK(b.layers[1].optimizer_state_bytes == 2 * b.layers[1].param_bytes);
  // ~28.8M parameters (embeddings 15.9M + 4 x 3.15M + pooler).
  CHECK(total_params(b) / 4 == Approx(28.76e6).epsilon(0.01));
  CHECK_THROWS_AS(analytic_profile("gpt-5"), planner_error);
}
