// A job that compresses its activations, gradients or all-reduce chunks puts
// fewer bytes on the wire; the planners price those transfers at those bytes.
#include "asteroid/planner/asteroid_planner.hpp"
#include "asteroid/planner/cost_model.hpp"
#include "asteroid/planner/error.hpp"
#include "asteroid/planner/exhaustive_planner.hpp"
#include "asteroid/planner/inference_planner.hpp"
#include "asteroid/planner/json_io.hpp"
#include "test_helpers.hpp"

#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <random>

using namespace asteroid::planner;
using asteroid::planner::test::device;
using asteroid::planner::test::linear_layer;

namespace {

model_profile two_layers(int64_t boundary_bytes, int64_t param_bytes = 1000) {
  model_profile p;
  p.input_bytes_per_sample = 100;
  p.layers = {linear_layer("a", 1e-3, 2e-3, boundary_bytes, param_bytes),
              linear_layer("b", 1e-3, 2e-3, 10, param_bytes)};
  // The stash stays what it is whatever crosses the link.
  for (auto& l : p.layers)
    l.stashed_bytes_per_sample = 40000;
  return p;
}

plan two_stages() {
  plan p;
  p.planner = "hand";
  p.batch_size = 16;
  p.micro_batches = 2;
  p.stages = {{0, 1, {0}, {8}}, {1, 2, {1}, {8}}};
  return p;
}

} // namespace

TEST_CASE("wire ratios: a transfer costs the bytes on the wire, forward for "
          "activations and backward for gradients", "[planner][wire]") {
  auto c = cluster::uniform("slow", {device("a", 1.0, 1 << 30), device("b", 1.0, 1 << 30)},
                            8e6); // 1 MB/s: the link dominates
  auto compressed = c;
  compressed.activation_wire_ratio = 0.5;
  compressed.gradient_wire_ratio = 0.5;
  auto p = two_stages();
  evaluate(p, two_layers(40000), compressed);
  // Halving the wire bytes is pricing half the tensor uncompressed.
  auto q = two_stages();
  evaluate(q, two_layers(20000), c);
  CHECK(p.predicted_round_s == Approx(q.predicted_round_s).epsilon(1e-12));
  auto r = two_stages();
  evaluate(r, two_layers(40000), c);
  CHECK(p.predicted_round_s < r.predicted_round_s * 0.6);
  // Each direction has its own ratio.
  const auto profile = two_layers(40000);
  auto steps_of = [&](const cluster& cl) { return make_steps(two_stages(), profile, cl); };
  auto mixed = c;
  mixed.activation_wire_ratio = 0.25;
  mixed.gradient_wire_ratio = 0.5;
  auto comm = steps_of(mixed).steps.at(1);
  auto plain = steps_of(c).steps.at(1);
  CHECK(comm.forward_s == Approx(plain.forward_s * 0.25));
  CHECK(comm.backward_s == Approx(plain.backward_s * 0.5));
}

TEST_CASE("wire ratios: the Asteroid planner's pipeline over a slow link is "
          "predicted faster when the job compresses", "[planner][wire]") {
  // Each device holds one layer only (10 MB of weights, as much again for
  // gradients and momentum, in a 45 MB budget): the plan must be a 2-stage
  // pipeline, whose boundary crosses a 1 MB/s link.
  auto profile = two_layers(400000, 10'000'000);
  auto c = cluster::uniform("slow", {device("a", 1.0, 45'000'000), device("b", 1.0, 45'000'000)},
                            8e6);
  auto compressed = c;
  compressed.activation_wire_ratio = 0.25;
  compressed.gradient_wire_ratio = 0.5;
  asteroid_planner planner;
  auto plain = planner.make_plan(profile, c, 16);
  auto fast = planner.make_plan(profile, compressed, 16);
  REQUIRE(plain.num_stages() == 2);
  REQUIRE(fast.num_stages() == 2);
  CHECK(fast.predicted_samples_per_s > plain.predicted_samples_per_s * 2);
  // Inference sends activations only.
  inference_options o;
  inference_plan ip;
  ip.stages = {{0, 1, 0}, {1, 2, 1}};
  auto a = ip, b = ip;
  evaluate_inference(a, profile, c, o);
  evaluate_inference(b, profile, compressed, o);
  CHECK(b.stages[0].send_s == Approx(a.stages[0].send_s * 0.25));
}

TEST_CASE("wire ratios: a replicated stage's all-reduce costs the bytes its "
          "chunks put on the wire, in the cost model and the Asteroid planner",
          "[planner][wire]") {
  // One stage over two devices: the all-reduce of 10 MB of gradients over a
  // 1 MB/s link is nearly all of the step.
  auto profile = two_layers(10, 5'000'000);
  auto c = cluster::uniform("slow", {device("a", 1.0, 1 << 30), device("b", 1.0, 1 << 30)},
                            8e6);
  c.latency_s.assign(2, std::vector<double>(2, 0.0));
  auto compressed = c;
  compressed.all_reduce_wire_ratio = 0.5;
  plan p;
  p.planner = "hand";
  p.batch_size = 16;
  p.micro_batches = 2;
  p.stages = {{0, 2, {0, 1}, {4, 4}}};
  auto plain_steps = make_steps(p, profile, c);
  auto half_steps = make_steps(p, profile, compressed);
  CHECK(half_steps.steps.at(0).allreduce_s
        == Approx(plain_steps.steps.at(0).allreduce_s * 0.5));
  CHECK(plain_steps.steps.at(0).allreduce_s > 0);
  // The planner sees the cheaper all-reduce: data parallelism over the slow
  // link is predicted faster when the job compresses its chunks.
  asteroid_planner planner;
  auto slow = planner.make_plan(profile, c, 16);
  auto fast = planner.make_plan(profile, compressed, 16);
  CHECK(fast.predicted_samples_per_s >= slow.predicted_samples_per_s);
  nlohmann::json j = compressed;
  CHECK(j.value("all_reduce_wire_ratio", 1.0) == 0.5);
  CHECK(parse_cluster(j, "back").all_reduce_wire_ratio == 0.5);
}

TEST_CASE("wire ratios: cluster files carry them and refuse ratios above 1",
          "[planner][wire]") {
  nlohmann::json j{{"devices", {{{"name", "a"}, {"speed", 1}, {"memory", "1GiB"}}}},
                   {"link_mbps", 100},
                   {"activation_wire_ratio", 0.5},
                   {"gradient_wire_ratio", 0.25}};
  auto c = parse_cluster(j, "c.json");
  CHECK(c.activation_wire_ratio == 0.5);
  CHECK(c.gradient_wire_ratio == 0.25);
  nlohmann::json back = c;
  CHECK(parse_cluster(back, "back").gradient_wire_ratio == 0.25);
  j["gradient_wire_ratio"] = 2;
  CHECK_THROWS_WITH(parse_cluster(j, "c.json"),
                    Catch::Contains("gradient_wire_ratio") && Catch::Contains("(0, 1]"));
}

TEST_CASE("wire ratios: a job that compresses only its slow links prices each link by "
          "its own rate, both ways, and a ring by its slowest link",
          "[planner][wire]") {
  // a-b 1 Gbit/s both ways; b-c 8 Mbit/s from b, 1 Gbit/s from c.
  auto c = cluster::uniform("mixed", {device("a", 1.0, 1 << 30), device("b", 1.0, 1 << 30),
                                      device("c", 1.0, 1 << 30)},
                            1e9);
  c.bandwidth_Bps[1][2] = 1e6;
  c.bandwidth_Bps[0][2] = c.bandwidth_Bps[2][0] = 1e6;
  c.activation_wire_ratio = 0.25;
  c.gradient_wire_ratio = 0.5;
  c.all_reduce_wire_ratio = 0.5;
  c.compress_below_Bps = 100e6 / 8; // 100 Mbit/s
  CHECK_FALSE(c.compressed(0, 1));
  CHECK(c.compressed(1, 2));
  CHECK(c.compressed(2, 1)); // the other way is fast, but both ends must agree
  CHECK(c.wire_ratio(0, 1, traffic::activations) == 1.0);
  CHECK(c.wire_ratio(2, 1, traffic::gradients) == 0.5);
  CHECK(c.payload_rate(1, 2, traffic::activations) == Approx(4e6));
  CHECK(c.payload_rate(2, 1, traffic::gradients) == Approx(1e9 / 8 / 0.5));
  // A transfer: float32 on the fast link, the codec's bytes on the slow one.
  CHECK(transfer_s(c, {0}, {1}, 1e6, traffic::activations) == Approx(1e6 / (1e9 / 8)));
  CHECK(transfer_s(c, {1}, {2}, 1e6, traffic::activations) == Approx(0.25));
  CHECK(transfer_s(c, {0, 1}, {2}, 1e6, traffic::gradients) == Approx(0.5));
  // Without the rate every link is compressed, as before.
  auto everywhere = c;
  everywhere.compress_below_Bps = 0;
  CHECK(transfer_s(everywhere, {0}, {1}, 1e6, traffic::activations)
        == Approx(0.25e6 / (1e9 / 8)));
  // A ring of fast links stays float32; one slow link compresses the ring.
  CHECK(allreduce_s(c, {0, 1}, 1e6) == Approx(1e6 / (1e9 / 8)));
  CHECK(allreduce_s(c, {0, 1, 2}, 3e6) == Approx(4.0 / 3 * 3e6 * 0.5 / 1e6));
  // Cluster files carry the rate (Mbit/s).
  nlohmann::json j = c;
  CHECK(j.value("compress_below_mbps", 0.0) == Approx(100));
  CHECK(parse_cluster(j, "back").compress_below_Bps == Approx(c.compress_below_Bps));
  j["compress_below_mbps"] = -1;
  CHECK_THROWS_WITH(parse_cluster(j, "c.json"), Catch::Contains("compress_below_mbps"));
}

TEST_CASE("wire ratios: with only the slow links compressed, the Asteroid planner "
          "prices its plans as the cost model does and stays within 5 % of the "
          "exhaustive optimum (random instances)",
          "[planner][wire][random]") {
  std::mt19937_64 rng(20261127);
  asteroid_planner asteroid;
  exhaustive_planner exhaustive;
  int compared = 0, mixed = 0;
  for (int k = 0; k < 60; ++k) {
    auto inst = test::make_random_instance(rng, 5, 4);
    inst.c.activation_wire_ratio = 0.25;
    inst.c.gradient_wire_ratio = 0.5;
    inst.c.all_reduce_wire_ratio = 0.5;
    // Links are drawn from 10 to 1000 Mbit/s: about half are compressed.
    inst.c.compress_below_Bps = 300e6 / 8;
    INFO("instance " << k);
    plan ex;
    try {
      ex = exhaustive.make_plan(inst.profile, inst.c, inst.batch);
    } catch (const planner_error&) {
      CHECK_THROWS_AS(asteroid.make_plan(inst.profile, inst.c, inst.batch), planner_error);
      continue;
    }
    auto as = asteroid.make_plan(inst.profile, inst.c, inst.batch);
    ++compared;
    bool some = false, all = true;
    for (int a = 0; a < inst.c.size(); ++a)
      for (int b = 0; b < inst.c.size(); ++b)
        if (a != b) {
          some = some || inst.c.compressed(a, b);
          all = all && inst.c.compressed(a, b);
        }
    if (some && !all)
      ++mixed;
    auto again = as;
    evaluate(again, inst.profile, inst.c);
    CHECK(again.predicted_round_s == Approx(as.predicted_round_s));
    auto ex_again = ex;
    evaluate(ex_again, inst.profile, inst.c);
    CHECK(ex_again.predicted_round_s == Approx(ex.predicted_round_s));
    CHECK(as.predicted_round_s >= ex.predicted_round_s * (1 - 1e-9));
    CHECK(as.predicted_round_s <= ex.predicted_round_s * 1.05);
  }
  CHECK(compared >= 30);
  CHECK(mixed >= 10);
}
