// Pipelined inference planning: EdgePipe's DP against an exhaustive search,
// the baselines, and ViT-L/16 on 16 devices of four types.
#include "asteroid/planner/analytic_profiles.hpp"
#include "asteroid/planner/device_catalog.hpp"
#include "asteroid/planner/error.hpp"
#include "asteroid/planner/inference_planner.hpp"
#include "test_helpers.hpp"

#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <optional>
#include <random>

using namespace asteroid::planner;
using asteroid::planner::test::device;
using asteroid::planner::test::linear_layer;

namespace {

/// A random instance whose devices' speed, memory and links follow their
/// type (what the DP assumes): 1-3 types of 1-2 devices, 1-7 layers.
std::pair<model_profile, cluster> random_inference_instance(std::mt19937& rng) {
  std::uniform_int_distribution<int> layers(1, 7), types(1, 3), per_type(1, 2);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  model_profile p;
  p.model = "random";
  p.input_bytes_per_sample = 1000 + static_cast<int64_t>(u(rng) * 100000);
  int64_t total_params = 0;
  const int L = layers(rng);
  for (int l = 0; l < L; ++l) {
    auto lp = linear_layer("l" + std::to_string(l), 1e-4 + u(rng) * 1e-2, 0.0,
                           1000 + static_cast<int64_t>(u(rng) * 200000),
                           static_cast<int64_t>(u(rng) * 4e6));
    // A fixed cost per pass, so that times are not proportional to the batch.
    lp.forward_s = {lp.forward_s[0] + 1e-3, lp.forward_s[1] + 1e-3};
    lp.working_bytes_per_sample = static_cast<int64_t>(u(rng) * 50000);
    total_params += lp.param_bytes;
    p.layers.push_back(lp);
  }
  const int K = types(rng);
  std::vector<double> speed(K);
  std::vector<int64_t> memory(K);
  std::vector<std::vector<double>> bw(K, std::vector<double>(K)), lat(K, std::vector<double>(K));
  for (int k = 0; k < K; ++k) {
    speed[k] = 0.5 + 2.5 * u(rng);
    // From a third of the weights (binding) to all of them and more.
    memory[k] = static_cast<int64_t>((0.3 + 1.2 * u(rng)) * static_cast<double>(total_params))
                + 4'000'000;
    for (int j = 0; j < K; ++j) {
      bw[k][j] = 1e6 + u(rng) * 1e8;
      lat[k][j] = u(rng) * 2e-3;
    }
  }
  std::vector<int> type_of;
  std::vector<device_spec> devices;
  for (int k = 0; k < K; ++k)
    for (int i = per_type(rng); i > 0; --i) {
      auto d = device("t" + std::to_string(k) + "-" + std::to_string(devices.size()),
                      speed[k], memory[k]);
      d.type = "t" + std::to_string(k);
      devices.push_back(d);
      type_of.push_back(k);
    }
  auto c = cluster::uniform("random", devices, 1e9);
  for (size_t i = 0; i < devices.size(); ++i)
    for (size_t j = 0; j < devices.size(); ++j) {
      c.bandwidth_Bps[i][j] = bw[type_of[i]][type_of[j]];
      c.latency_s[i][j] = lat[type_of[i]][type_of[j]];
    }
  c.co_location_slowdown = u(rng) < 0.5 ? 1.0 : 1.3;
  return {p, c};
}

} // namespace

TEST_CASE("inference planner: EdgePipe's DP equals the exhaustive optimum on 400 "
          "random small instances", "[planner][inference]") {
  std::mt19937 rng(20261126);
  int compared = 0, infeasible = 0, pipelines = 0;
  for (int i = 0; i < 400; ++i) {
    auto [profile, c] = random_inference_instance(rng);
    inference_options o;
    o.micro_batch = 1 + i % 8;
    CAPTURE(i, profile.num_layers(), c.size());
    std::optional<inference_plan> exact;
    try {
      exact = plan_inference_exhaustive(profile, c, o);
    } catch (const planner_error& e) {
      CHECK_THAT(e.what(), Catch::Contains("no pipeline fits"));
    }
    if (!exact) {
      CHECK_THROWS_WITH(plan_inference(profile, c, o), Catch::Contains("no pipeline"));
      ++infeasible;
      continue;
    }
    auto dp = plan_inference(profile, c, o);
    CHECK(dp.bottleneck_s == Approx(exact->bottleneck_s).epsilon(1e-9));
    CHECK(inference_fits_memory(dp, c));
    pipelines += dp.num_stages() > 1;
    ++compared;
  }
  // The instances exercise both outcomes and real pipelines.
  CHECK(compared >= 300);
  CHECK(infeasible > 0);
  CHECK(pipelines > 100);
}

TEST_CASE("inference planner: evaluation prices compute, sends and memory",
          "[planner][inference]") {
  model_profile p;
  p.input_bytes_per_sample = 100;
  p.layers = {linear_layer("a", 0.01, 0, 1000, 4000),
              linear_layer("b", 0.02, 0, 10, 8000)};
  p.layers[1].working_bytes_per_sample = 50;
  auto c = cluster::uniform("two", {device("x", 1.0, 1 << 20), device("y", 2.0, 1 << 20)},
                            8e6); // 1 MB/s
  inference_options o;
  o.micro_batch = 4;
  o.queue_depth = 2;
  inference_plan plan;
  plan.stages = {{0, 1, 0}, {1, 2, 1}};
  evaluate_inference(plan, p, c, o);
  CHECK(plan.stages[0].compute_s == Approx(0.04));
  CHECK(plan.stages[0].send_s == Approx(4 * 1000 / 1e6));
  CHECK(plan.stages[1].compute_s == Approx(0.08 / 2));
  CHECK(plan.stages[1].send_s == 0);
  CHECK(plan.bottleneck_s == Approx(0.04));
  CHECK(plan.samples_per_s == Approx(100));
  CHECK(plan.latency_s == Approx(0.04 + 0.004 + 0.04));
  // Weights + 2 requests in each queue + one request's working memory.
  CHECK(plan.stages[1].memory_bytes == 8000 + 2 * 4 * (1000 + 10) + 50 * 4);
  plan.stages[1].device = 0;
  CHECK_THROWS_WITH(evaluate_inference(plan, p, c, o),
                    Catch::Contains("stage 1: device 0 already runs another stage"));
  plan.stages = {{0, 1, 0}};
  CHECK_THROWS_WITH(evaluate_inference(plan, p, c, o),
                    Catch::Contains("the stages end at layer 1, the model has 2"));
}

TEST_CASE("inference planner: ViT-L/16 on 16 devices of four types beats both "
          "baselines within every device's memory", "[planner][inference]") {
  auto profile = analytic_profile("vit-large");
  REQUIRE(profile.num_layers() == 50);
  int64_t params = 0;
  for (const auto& l : profile.layers)
    params += l.param_bytes;
  CHECK(params == 4 * int64_t{304'326'632});
  std::vector<device_spec> devices;
  for (int i = 0; i < 6; ++i)
    devices.push_back(make_device("nano-" + std::to_string(i), "jetson-nano"));
  for (int i = 0; i < 4; ++i)
    devices.push_back(make_device("tx2-" + std::to_string(i), "jetson-tx2"));
  for (int i = 0; i < 4; ++i)
    devices.push_back(make_device("nx-" + std::to_string(i), "xavier-nx"));
  for (int i = 0; i < 2; ++i) {
    auto d = device("laptop-" + std::to_string(i), 6.0, int64_t{8} << 30);
    d.type = "laptop";
    devices.push_back(d);
  }
  auto c = cluster::uniform("16 devices", devices, 1e9);
  inference_options o;
  o.micro_batch = 8;
  auto best = plan_inference(profile, c, o);
  CHECK(best.planner == "edgepipe");
  CHECK(inference_fits_memory(best, c));
  CHECK(best.num_stages() > 1);
  auto alone = plan_inference_on_device(profile, c, o);
  CHECK(alone.stages[0].device >= 14); // a laptop, the fastest that holds it
  CHECK(best.samples_per_s > alone.samples_per_s);
  auto straight = plan_inference_straight(profile, c, o);
  CHECK(straight.num_stages() == 16);
  CHECK(best.samples_per_s >= straight.samples_per_s);
  nlohmann::json j = best;
  CHECK(j["mode"] == "inference");
  CHECK(j["stages"].size() == best.stages.size());
}

TEST_CASE("inference planner: too many distinct device types are refused up front",
          "[planner][inference]") {
  auto profile = analytic_profile("vit-large");
  std::vector<device_spec> devices;
  for (int i = 0; i < 20; ++i)
    devices.push_back(device("d" + std::to_string(i), 1.0 + 0.1 * i, int64_t{8} << 30));
  auto c = cluster::uniform("all different", devices, 1e9);
  CHECK_THROWS_WITH(plan_inference(profile, c, {}),
                    Catch::Contains("20 distinct types")
                      && Catch::Contains("give devices that compute alike the same"));
}
