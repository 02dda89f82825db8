// Devices emulated on one machine compute slower when several take part in
// a plan (cluster::co_location_slowdown): the cost model charges multi-device
// plans for it, and the planners compare them with one-device plans that do
// not pay it.
#include <catch2/catch.hpp>

#include <random>

#include <nlohmann/json.hpp>

#include "asteroid/planner/asteroid_planner.hpp"
#include "asteroid/planner/baselines.hpp"
#include "asteroid/planner/co_location.hpp"
#include "asteroid/planner/cost_model.hpp"
#include "asteroid/planner/error.hpp"
#include "asteroid/planner/exhaustive_planner.hpp"
#include "asteroid/planner/json_io.hpp"
#include "test_helpers.hpp"

using namespace asteroid::planner;
using asteroid::planner::test::device;
using asteroid::planner::test::linear_layer;

namespace {

/// Four equal layers; two equal devices on fast links, where a two-stage
/// pipeline beats one device alone unless the devices slow each other down.
struct two_equal_devices {
  model_profile profile;
  cluster c;
  two_equal_devices() {
    profile.model = "four";
    profile.device = "ref";
    profile.input_bytes_per_sample = 1000;
    for (int l = 0; l < 4; ++l)
      profile.layers.push_back(linear_layer("l" + std::to_string(l), 1e-3, 2e-3, 1000, 1000));
    c = cluster::uniform("two", {device("a", 1.0, int64_t{1} << 30),
                                 device("b", 1.0, int64_t{1} << 30)},
                         1e10);
  }
};

} // namespace

TEST_CASE("co-location slows the compute of multi-device plans only", "[planner][co-location]") {
  two_equal_devices x;
  plan alone;
  alone.batch_size = 16;
  alone.micro_batches = 1;
  alone.stages.push_back({0, 4, {0}, {16}});
  plan pipeline;
  pipeline.batch_size = 16;
  pipeline.micro_batches = 4;
  pipeline.stages.push_back({0, 2, {0}, {4}});
  pipeline.stages.push_back({2, 4, {1}, {4}});
  auto before_alone = make_steps(alone, x.profile, x.c);
  auto before_pipe = make_steps(pipeline, x.profile, x.c);
  x.c.co_location_slowdown = 1.5;
  CHECK(co_located_slowdown(alone, x.c) == 1.0);
  CHECK(co_located_slowdown(pipeline, x.c) == 1.5);
  auto after_alone = make_steps(alone, x.profile, x.c);
  auto after_pipe = make_steps(pipeline, x.profile, x.c);
  CHECK(after_alone.steps[0].forward_s == before_alone.steps[0].forward_s);
  CHECK(after_alone.steps[0].backward_s == before_alone.steps[0].backward_s);
  for (size_t k = 0; k < after_pipe.steps.size(); ++k) {
    INFO("step " << k);
    const double f = after_pipe.steps[k].type == pipeline_step::kind::compute ? 1.5 : 1.0;
    CHECK(after_pipe.steps[k].forward_s == Approx(f * before_pipe.steps[k].forward_s));
    CHECK(after_pipe.steps[k].backward_s == Approx(f * before_pipe.steps[k].backward_s));
  }
}

TEST_CASE("planners keep one device when co-location costs more than a pipeline gains",
          "[planner][co-location]") {
  two_equal_devices x;
  asteroid_planner asteroid;
  exhaustive_planner exhaustive;
  auto free = asteroid.make_plan(x.profile, x.c, 16);
  REQUIRE(free.num_devices() == 2); // both devices help when they share nothing
  const double gain = free.predicted_samples_per_s /
                      on_device_planner().make_plan(x.profile, x.c, 16).predicted_samples_per_s;
  REQUIRE(gain > 1.2);

  SECTION("a slowdown below the gain keeps both devices, priced with it") {
    x.c.co_location_slowdown = 1.1;
    for (planner_base* p : std::initializer_list<planner_base*>{&asteroid, &exhaustive}) {
      auto shared = p->make_plan(x.profile, x.c, 16);
      INFO(p->name());
      CHECK(shared.planner == p->name());
      CHECK(shared.num_devices() == 2);
      CHECK(shared.predicted_samples_per_s == Approx(free.predicted_samples_per_s / 1.1));
    }
  }
  SECTION("a slowdown above the gain falls back to one device, not priced with it") {
    x.c.co_location_slowdown = gain * 1.05;
    auto alone = on_device_planner().make_plan(x.profile, x.c, 16);
    for (planner_base* p : std::initializer_list<planner_base*>{&asteroid, &exhaustive}) {
      auto shared = p->make_plan(x.profile, x.c, 16);
      INFO(p->name());
      CHECK(shared.planner == p->name());
      CHECK(shared.num_devices() == 1);
      CHECK(shared.predicted_samples_per_s == Approx(alone.predicted_samples_per_s));
    }
  }
}

TEST_CASE("asteroid matches exhaustive search under co-location (random instances)",
          "[planner][co-location][random]") {
  std::mt19937_64 rng(20261123);
  int compared = 0, one_device = 0, several = 0;
  for (int k = 0; k < 60; ++k) {
    auto inst = test::make_random_instance(rng, 6, 4);
    inst.c.co_location_slowdown = std::uniform_real_distribution<double>(1.0, 1.6)(rng);
    INFO("instance " << k << ", slowdown " << inst.c.co_location_slowdown);
    auto both = test::plan_both(inst.profile, inst.c, inst.batch);
    REQUIRE(both.asteroid.has_value() == both.exhaustive.has_value());
    if (!both.exhaustive)
      continue;
    const plan& ex = *both.exhaustive;
    const plan& as = *both.asteroid;
    ++compared;
    (ex.num_devices() == 1 ? one_device : several)++;
    // Both are priced on the same cluster, the factor included.
    auto again = as;
    evaluate(again, inst.profile, inst.c);
    CHECK(again.predicted_round_s == Approx(as.predicted_round_s));
    CHECK(as.predicted_round_s >= ex.predicted_round_s * (1 - 1e-9));
    CHECK(as.predicted_round_s <= ex.predicted_round_s * 1.05);
  }
  CHECK(compared >= 30);
  CHECK(one_device >= 3);
  CHECK(several >= 3);
}

TEST_CASE("cluster files carry co_location_slowdown", "[planner][co-location][json]") {
  nlohmann::json j = {{"devices", {{{"name", "a"}, {"speed", 1.0}, {"memory", "1GiB"}},
                                   {{"name", "b"}, {"speed", 0.5}, {"memory", "1GiB"}}}},
                      {"link_mbps", 100}};
  CHECK(parse_cluster(j, "c").co_location_slowdown == 1.0);
  CHECK_FALSE(nlohmann::json(parse_cluster(j, "c")).contains("co_location_slowdown"));
  j["co_location_slowdown"] = 1.25;
  auto c = parse_cluster(j, "c");
  CHECK(c.co_location_slowdown == 1.25);
  CHECK(parse_cluster(nlohmann::json(c), "again").co_location_slowdown == 1.25);
  j["co_location_slowdown"] = 0.8;
  CHECK_THROWS_WITH(parse_cluster(j, "c"), Catch::Contains("co_location_slowdown") &&
                                              Catch::Contains("at least 1") &&
                                              Catch::Contains("0.8"));
  j["co_location_slowdown"] = "fast";
  CHECK_THROWS_WITH(parse_cluster(j, "c"), Catch::Contains("co_location_slowdown"));
}
