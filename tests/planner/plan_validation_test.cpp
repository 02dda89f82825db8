#include <catch2/catch.hpp>

#include "asteroid/planner/error.hpp"
#include "asteroid/planner/plan_validation.hpp"
#include "test_helpers.hpp"

using namespace asteroid::planner;

namespace {

cluster three_devices() {
  return cluster::uniform("c", {test::device("a", 1, 1 << 30), test::device("b", 1, 1 << 30),
                                test::device("c", 1, 1 << 30)},
                          1e8);
}

plan good_plan() {
  plan p;
  p.batch_size = 16;
  p.micro_batches = 2;
  p.stages.push_back({0, 2, {0, 2}, {3, 5}});
  p.stages.push_back({2, 5, {1}, {8}});
  return p;
}

} // namespace

TEST_CASE("validate accepts a good plan", "[planner][validate]") {
  CHECK_NOTHROW(validate(good_plan(), 5, three_devices()));
}

TEST_CASE("validate names the stage, layer or device at fault", "[planner][validate]") {
  auto c = three_devices();
  auto p = good_plan();
  p.stages[1].first_layer = 3;
  CHECK_THROWS_WITH(validate(p, 5, c), Catch::Contains("stage 1: starts at layer 3") &&
                                         Catch::Contains("layer 2 is not covered"));
  p = good_plan();
  p.stages[1].first_layer = 1;
  CHECK_THROWS_WITH(validate(p, 5, c), Catch::Contains("stage 1") &&
                                         Catch::Contains("layer 1 is in two stages"));
  p = good_plan();
  p.stages[1].end_layer = 4;
  CHECK_THROWS_WITH(validate(p, 5, c), Catch::Contains("layers 4..4 are not covered"));
  p = good_plan();
  p.stages[1].end_layer = 6;
  CHECK_THROWS_WITH(validate(p, 5, c), Catch::Contains("stage 1: ends at layer 5 but the model "
                                                       "has 5 layers"));
  p = good_plan();
  p.stages[0].shares = {3, 4};
  CHECK_THROWS_WITH(validate(p, 5, c), Catch::Contains("stage 0: shares sum to 7 but the "
                                                       "micro-batch size is 8"));
  p = good_plan();
  p.stages[1].devices = {7};
  CHECK_THROWS_WITH(validate(p, 5, c), Catch::Contains("stage 1: device 7 does not exist "
                                                       "(cluster has 3 devices)"));
  p = good_plan();
  p.stages[1].devices = {2};
  CHECK_THROWS_WITH(validate(p, 5, c), Catch::Contains("stage 1: device 2 (c) is already used "
                                                       "by stage 0"));
  p = good_plan();
  p.micro_batches = 3;
  CHECK_THROWS_WITH(validate(p, 5, c), Catch::Contains("not a multiple of micro_batches 3"));
  p = good_plan();
  p.stages[0].devices.clear();
  p.stages[0].shares.clear();
  CHECK_THROWS_WITH(validate(p, 5, c), Catch::Contains("stage 0: no devices"));
  p = good_plan();
  p.stages[0].first_layer = 1;
  CHECK_THROWS_WITH(validate(p, 5, c), Catch::Contains("stage 0: starts at layer 1, expected "
                                                       "layer 0"));
}

TEST_CASE("validate refuses a device with a zero share", "[planner][validate]") {
  // A device either computes part of every micro-batch or is not in the group.
  auto p = good_plan();
  p.stages[0].shares = {8, 0};
  CHECK_THROWS_WITH(validate(p, 5, three_devices()),
                    Catch::Contains("stage 0: device 2 (c) has a zero share") &&
                      Catch::Contains("remove it from the stage"));
}
