#include <catch2/catch.hpp>

#include "asteroid/planner/cost_model.hpp"
#include "asteroid/planner/error.hpp"
#include "asteroid/planner/plan_patch.hpp"
#include "asteroid/planner/plan_validation.hpp"
#include "test_helpers.hpp"

using namespace asteroid::planner;
using asteroid::planner::test::device;
using asteroid::planner::test::linear_layer;

namespace {

cluster four_devices() {
  std::vector<device_spec> d{device("a", 2.0, 1LL << 30), device("b", 1.0, 1LL << 30),
                             device("c", 1.0, 1LL << 30), device("d", 1.0, 1LL << 30)};
  return cluster::uniform("four", d, 1e8);
}

/// Stages [0,2) on {0,1} and [2,4) on {2}, [4,6) on {3}.
plan three_stages() {
  plan p;
  p.planner = "test";
  p.batch_size = 32;
  p.micro_batches = 4;
  p.stages = {{0, 2, {0, 1}, {5, 3}}, {2, 4, {2}, {8}}, {4, 6, {3}, {8}}};
  return p;
}

model_profile six_layers() {
  model_profile m;
  m.model = "six";
  m.device = "ref";
  m.input_bytes_per_sample = 1000;
  for (int l = 0; l < 6; ++l)
    m.layers.push_back(linear_layer("l" + std::to_string(l), 1e-3, 2e-3, 1000, 1000));
  return m;
}

} // namespace

TEST_CASE("backup_device: next stage's first device, last stage backs up to the previous") {
  auto p = three_stages();
  CHECK(backup_device(p, 0) == 2);
  CHECK(backup_device(p, 1) == 3);
  CHECK(backup_device(p, 2) == 2);
  plan one = p;
  one.stages = {{0, 6, {0, 1}, {4, 4}}};
  CHECK(backup_device(one, 0) == -1);
}

TEST_CASE("patch_plan: a lost member of a group only changes that group's shares") {
  auto c = four_devices();
  auto r = patch_plan(three_stages(), {1}, c);
  const auto& q = r.patched;
  REQUIRE(q.num_stages() == 3);
  CHECK(q.stages[0].devices == std::vector<int>{0});
  CHECK(q.stages[0].shares == std::vector<int64_t>{8});
  CHECK(q.stages[1].devices == std::vector<int>{2});
  CHECK(q.stages[2].devices == std::vector<int>{3});
  CHECK(q.stages[0].first_layer == 0);
  CHECK(q.stages[0].end_layer == 2);
  CHECK_NOTHROW(validate(q, 6, c));
  CHECK_FALSE(r.changes.empty());
}

TEST_CASE("patch_plan: survivors of a group get shares proportional to speed") {
  cluster c = four_devices();
  plan p = three_stages();
  p.stages[0] = {0, 2, {0, 1, 3}, {4, 2, 2}};
  p.stages[2] = {4, 6, {2}, {8}};
  p.stages[1] = {2, 4, {2}, {8}};
  // device 3 leaves: 0 (speed 2) and 1 (speed 1) share 8 samples as 5:3 or 6:2
  // under integer rounding of 16/3 : 8/3; Algorithm 1 gives the faster more.
  auto q = patch_plan(p, {3}, c).patched;
  REQUIRE(q.stages[0].devices == std::vector<int>{0, 1});
  CHECK(q.stages[0].shares[0] + q.stages[0].shares[1] == 8);
  CHECK(q.stages[0].shares[0] > q.stages[0].shares[1]);
}

TEST_CASE("patch_plan: a lost single-device stage merges into the stage holding its replica") {
  auto c = four_devices();
  SECTION("middle stage -> next stage") {
    auto q = patch_plan(three_stages(), {2}, c).patched;
    REQUIRE(q.num_stages() == 2);
    CHECK(q.stages[0].end_layer == 2);
    CHECK(q.stages[1].first_layer == 2);
    CHECK(q.stages[1].end_layer == 6);
    CHECK(q.stages[1].devices == std::vector<int>{3});
    CHECK_NOTHROW(validate(q, 6, c));
  }
  SECTION("last stage -> previous stage") {
    auto q = patch_plan(three_stages(), {3}, c).patched;
    REQUIRE(q.num_stages() == 2);
    CHECK(q.stages[1].first_layer == 2);
    CHECK(q.stages[1].end_layer == 6);
    CHECK(q.stages[1].devices == std::vector<int>{2});
  }
  SECTION("two devices at once: a group member and a whole stage") {
    auto q = patch_plan(three_stages(), {1, 3}, c).patched;
    REQUIRE(q.num_stages() == 2);
    CHECK(q.stages[0].devices == std::vector<int>{0});
    CHECK(q.stages[1].devices == std::vector<int>{2});
    CHECK(q.stages[1].end_layer == 6);
    CHECK_NOTHROW(validate(q, 6, c));
  }
  SECTION("two adjacent stages lost: both merge into the surviving one") {
    auto q = patch_plan(three_stages(), {2, 3}, c).patched;
    REQUIRE(q.num_stages() == 1);
    CHECK(q.stages[0].first_layer == 0);
    CHECK(q.stages[0].end_layer == 6);
    CHECK(q.stages[0].devices == std::vector<int>{0, 1});
  }
}

TEST_CASE("patch_plan without rebalancing: a lost member's share goes whole to "
          "the first survivor, and a merged stage keeps its shares") {
  cluster c = four_devices();
  patch_options rigid;
  rigid.rebalance = false;
  plan p = three_stages();
  p.stages[0] = {0, 2, {0, 1, 3}, {2, 4, 2}};
  p.stages[2] = {4, 6, {2}, {8}};
  p.stages[1] = {2, 4, {2}, {8}};
  auto q = patch_plan(p, {1}, c, std::nullopt, rigid).patched;
  CHECK(q.stages[0].devices == std::vector<int>{0, 3});
  CHECK(q.stages[0].shares == std::vector<int64_t>{6, 2});
  // Device 0 lost: device 1 takes its 2 on top of its 4, where Algorithm 1
  // would split 8 evenly between the two equally fast survivors.
  auto r = patch_plan(p, {0}, c, std::nullopt, rigid).patched;
  CHECK(r.stages[0].devices == std::vector<int>{1, 3});
  CHECK(r.stages[0].shares == std::vector<int64_t>{6, 2});
  auto balanced = patch_plan(p, {0}, c).patched;
  CHECK(balanced.stages[0].shares == std::vector<int64_t>{4, 4});
  auto merged = patch_plan(three_stages(), {2}, c, std::nullopt, rigid).patched;
  REQUIRE(merged.num_stages() == 2);
  CHECK(merged.stages[1].end_layer == 6);
  CHECK(merged.stages[1].shares == std::vector<int64_t>{8});
  CHECK(merged.stages[0].shares == std::vector<int64_t>{5, 3});
  CHECK_NOTHROW(validate(merged, 6, c));
}

TEST_CASE("patch_plan: with a profile the patch is evaluated by the cost model") {
  auto c = four_devices();
  auto prof = six_layers();
  auto p = three_stages();
  evaluate(p, prof, c);
  auto q = patch_plan(p, {1}, c, prof).patched;
  CHECK(q.predicted_round_s > 0);
  // Losing a device cannot make the same pipeline faster.
  CHECK(q.predicted_round_s >= p.predicted_round_s);
  // Both predictions are the patched plan's, not the old plan's.
  CHECK(q.simulated_round_s > 0);
  CHECK(q.simulated_round_s >= p.simulated_round_s);
}

TEST_CASE("patch_plan: losing everything is an error that says so") {
  auto c = four_devices();
  CHECK_THROWS_WITH(patch_plan(three_stages(), {0, 1, 2, 3}, c),
                    Catch::Contains("every device"));
}

TEST_CASE("patch_plan: a survivor that Algorithm 1 gives no sample leaves the group, idle") {
  // Stage 0 on a, b and a device 100x slower; a is lost, and the 3 samples of
  // a micro-batch all go to b: the slow device is left idle, not given a
  // zero share (validate refuses those).
  std::vector<device_spec> d{device("a", 1.0, 1LL << 30), device("b", 1.0, 1LL << 30),
                             device("slow", 0.01, 1LL << 30), device("d", 1.0, 1LL << 30)};
  auto c = cluster::uniform("slow", d, 1e8);
  plan p;
  p.planner = "test";
  p.batch_size = 6;
  p.micro_batches = 2;
  p.stages = {{0, 3, {0, 1, 2}, {1, 1, 1}}, {3, 6, {3}, {3}}};
  REQUIRE_NOTHROW(validate(p, 6, c));
  auto r = patch_plan(p, {0}, c);
  const auto& q = r.patched;
  REQUIRE(q.num_stages() == 2);
  CHECK(q.stages[0].devices == std::vector<int>{1});
  CHECK(q.stages[0].shares == std::vector<int64_t>{3});
  CHECK_NOTHROW(validate(q, 6, c));
  bool said = false;
  for (const auto& change : r.changes)
    said = said || change.find("device 2 left idle: no sample") != std::string::npos;
  CHECK(said);
}
