#include <catch2/catch.hpp>

#include <cstdio>

#include "asteroid/planner/cost_model.hpp"
#include "asteroid/planner/plan_table.hpp"
#include "test_helpers.hpp"

using namespace asteroid::planner;

TEST_CASE("format_plan_table shows stages, layers, devices and predictions", "[planner][table]") {
  model_profile prof;
  prof.model = "tiny";
  prof.layers.push_back(test::linear_layer("conv1", 1e-3, 2e-3, 1000, 1'000'000));
  prof.layers.push_back(test::linear_layer("fc", 2e-3, 4e-3, 10, 2'000'000));
  auto c = cluster::uniform("lab", {test::device("alpha", 1, 1 << 30),
                                    test::device("beta", 2, 1 << 30),
                                    test::device("gamma", 1, 5'000'000)},
                            8e6);
  plan p;
  p.planner = "asteroid";
  p.batch_size = 8;
  p.micro_batches = 2;
  p.stages.push_back({0, 1, {0, 1}, {1, 3}});
  p.stages.push_back({1, 2, {2}, {4}});
  auto text = format_plan_table(p, prof, c);
  CHECK_THAT(text, Catch::Contains("stage 0: layers 0-0 (conv1 .. conv1)"));
  CHECK_THAT(text, Catch::Contains("stage 1: layers 1-1 (fc .. fc)"));
  CHECK_THAT(text, Catch::Contains("alpha"));
  CHECK_THAT(text, Catch::Contains("beta"));
  CHECK_THAT(text, Catch::Contains("2 micro-batches x 4"));
  // gamma needs 6 MB for stage 1 but has 5 MB.
  CHECK_THAT(text, Catch::Contains("OVER BUDGET"));
  CHECK_THAT(text, Catch::Contains("predicted: 1.060 s per round, 7.54 samples/s"));
  // And the plan's 1F1B schedule simulated on the same step times.
  evaluate(p, prof, c);
  REQUIRE(p.simulated_round_s > 0);
  char line[96];
  std::snprintf(line, sizeof line, "1F1B schedule simulated: %.3f s per round, %.2f samples/s",
                p.simulated_round_s, p.simulated_samples_per_s);
  CHECK_THAT(text, Catch::Contains(line));
}
