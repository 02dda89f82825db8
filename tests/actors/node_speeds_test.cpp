// Where the planner's node speeds come from: the nodes' reported (emulated)
// slowdowns, or the model timed on every node. Ports 27314-27315.
#include "asteroid/actors/node_capabilities.hpp"
#include "job_test_helpers.hpp"

#include <catch2/catch.hpp>

#include <cstdio>

using namespace asteroid;
using namespace asteroid::test;

TEST_CASE("a planner job times the model on every node when asked, and plans with the "
          "measured speeds", "[speeds]") {
  // Node 1 is emulated 4 times slower. Its reported slowdown says as much,
  // so the measured speeds must agree with it; a GPU beside CPU nodes (no
  // slowdown reported) is what "auto" measures for.
  // Micro-batches of 32 rows: long enough to time on a busy host.
  auto train = synthetic(64 * 3);
  auto job = base_job("cnn", make_plan(64, 2, {{0, 4, {0}, {32}}}));
  job.plan.reset();
  job.planner = "asteroid";
  job.max_steps = 2;
  job.measure_links = false;
  auto co = cluster_options(2, 27314);
  co.slowdowns = {1.0, 4.0};
  actors::local_cluster cluster{co};
  SECTION("measured") {
    job.speeds = "measured";
    auto r = run_on_cluster(job, cluster, train);
    REQUIRE(r.steps == 2);
    CHECK(r.speeds_source == "measured");
    REQUIRE(r.device_speeds.size() == 2);
    const double ratio = r.device_speeds[1] / r.device_speeds[0];
    std::printf("[speeds measured] node0 %.3f node1 %.3f (ratio %.3f, reported 0.25)\n",
                r.device_speeds[0], r.device_speeds[1], ratio);
    // 0.25 times the ratio of two timings of the same work taken at
    // different moments on a loaded host: a wide band, but node 1 slower.
    CHECK(ratio > 0.1);
    CHECK(ratio < 0.6);
  }
  SECTION("auto, with nodes of one kind: reported") {
    auto r = run_on_cluster(job, cluster, train);
    REQUIRE(r.steps == 2);
    CHECK(r.speeds_source == "reported");
    REQUIRE(r.device_speeds.size() == 2);
    CHECK(r.device_speeds[1] / r.device_speeds[0] == Approx(0.25));
  }
}

TEST_CASE("speeds are measured when asked, or by default when the nodes name different "
          "compute devices", "[speeds]") {
  using nlohmann::json;
  const json cpu{{"compute_device", "cpu"}, {"device_name", "cpu"}};
  const json h200{{"compute_device", "cuda:0"}, {"device_name", "NVIDIA H200"}};
  const json orin{{"compute_device", "cuda:0"}, {"device_name", "Orin"}};
  const json h200_1{{"compute_device", "cuda:1"}, {"device_name", "NVIDIA H200"}};
  CHECK_FALSE(actors::speeds_to_measure("auto", {cpu, cpu}));
  CHECK(actors::speeds_to_measure("auto", {cpu, h200}));
  CHECK(actors::speeds_to_measure("auto", {h200, orin}));
  CHECK_FALSE(actors::speeds_to_measure("auto", {h200, h200_1}));
  // An older node's capabilities without the fields count as a CPU.
  CHECK(actors::speeds_to_measure("auto", {json::object(), h200}));
  CHECK(actors::speeds_to_measure("measured", {cpu, cpu}));
  CHECK_FALSE(actors::speeds_to_measure("reported", {cpu, h200}));
  CHECK_THROWS_WITH(actors::speeds_to_measure("guessed", {cpu}),
                    Catch::Contains("job speeds 'guessed'"));
}
