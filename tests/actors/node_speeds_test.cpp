// Where the planner's node speeds come from: the nodes' reported (emulated)
// slowdowns, or the model timed on every node. Ports 27311-27312.
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
  auto train = synthetic(16 * 3);
  auto job = base_job("cnn", make_plan(16, 2, {{0, 4, {0}, {8}}}));
  job.plan.reset();
  job.planner = "asteroid";
  job.max_steps = 2;
  job.measure_links = false;
  auto co = cluster_options(2, 27311);
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
    CHECK(ratio > 0.15);
    CHECK(ratio < 0.45);
  }
  SECTION("auto, with nodes of one kind: reported") {
    auto r = run_on_cluster(job, cluster, train);
    REQUIRE(r.steps == 2);
    CHECK(r.speeds_source == "reported");
    REQUIRE(r.device_speeds.size() == 2);
    CHECK(r.device_speeds[1] / r.device_speeds[0] == Approx(0.25));
  }
}
