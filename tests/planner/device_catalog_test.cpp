#include <catch2/catch.hpp>

#include <cmath>

#include "asteroid/planner/device_catalog.hpp"
#include "asteroid/planner/error.hpp"
#include "test_helpers.hpp"

using namespace asteroid::planner;

TEST_CASE("catalog speeds are derived from the paper's epoch times", "[planner][catalog]") {
  const auto& nano = device_type("jetson-nano");
  const auto& tx2 = device_type("jetson-tx2");
  const auto& nx = device_type("xavier-nx");
  CHECK(nano.speed == 1.0);
  // Geometric mean of MobileNetV2 22/8.5 and EfficientNet-B1 26.7/11.2.
  CHECK(tx2.speed == Approx(std::sqrt((22.0 / 8.5) * (26.7 / 11.2))));
  CHECK(tx2.speed > 26.7 / 11.2);
  CHECK(tx2.speed < 22.0 / 8.5);
  // NX: assumption, scaled by cores x clock from TX2.
  CHECK(nx.speed_is_assumption);
  CHECK_FALSE(tx2.speed_is_assumption);
  CHECK(nx.speed == Approx(tx2.speed * 384 * 1100 / (256 * 1300.0)));
  CHECK(nano.memory_bytes == 4LL << 30);
  CHECK(tx2.memory_bytes == 8LL << 30);
  CHECK(nx.memory_bytes == 8LL << 30);
  CHECK_THROWS_WITH(device_type("pixel"), Catch::Contains("unknown device type \"pixel\"") &&
                                            Catch::Contains("xavier-nx"));
}

TEST_CASE("profiles scale between device types", "[planner][catalog]") {
  model_profile p;
  p.model = "m";
  p.device = "jetson-nano";
  p.layers.push_back(test::linear_layer("l", 1.0, 2.0, 10, 10));
  auto q = scale_profile(p, "jetson-tx2");
  CHECK(q.device == "jetson-tx2");
  CHECK(q.layers[0].forward_s[0] == Approx(1.0 / device_type("jetson-tx2").speed));
  CHECK(q.layers[0].backward_s[1] == Approx(32.0 / device_type("jetson-tx2").speed));
  auto back = scale_profile(q, "jetson-nano");
  CHECK(back.layers[0].forward_s[0] == Approx(1.0));
  CHECK_THROWS_AS(scale_profile(p, 0.0, "x"), planner_error);

  // A TX2-measured profile on a mixed cluster: speeds become TX2-relative.
  auto c = cluster::uniform("c", {make_device("n", "jetson-nano"), make_device("t", "jetson-tx2")},
                            1e8);
  auto r = rebase_speeds(c, q);
  CHECK(r.devices[1].speed == Approx(1.0));
  CHECK(r.devices[0].speed == Approx(1.0 / device_type("jetson-tx2").speed));
  // Unknown profiling device: speeds unchanged.
  p.device = "local";
  CHECK(rebase_speeds(c, p).devices[1].speed == c.devices[1].speed);
}
