#include <catch2/catch.hpp>

#include <random>

#include "asteroid/planner/cost_model.hpp"
#include "asteroid/planner/error.hpp"
#include "asteroid/planner/simulator.hpp"
#include "test_helpers.hpp"

using namespace asteroid::planner;

namespace {

// Two layers, linear times (seconds per sample on the profiling device):
//   layer 0: fwd 1 ms, bwd 2 ms, output 1000 B, params 1 MB (+1 MB optimizer)
//   layer 1: fwd 2 ms, bwd 4 ms, output 10 B,   params 2 MB (+2 MB optimizer)
// Input 500 B per sample.
model_profile two_layers() {
  model_profile p;
  p.model = "two";
  p.input_bytes_per_sample = 500;
  p.layers.push_back(test::linear_layer("l0", 1e-3, 2e-3, 1000, 1'000'000));
  p.layers.push_back(test::linear_layer("l1", 2e-3, 4e-3, 10, 2'000'000));
  return p;
}

// Speeds 1, 2, 1; every link 8 Mbit/s = 1 MB/s, no latency.
cluster three() {
  return cluster::uniform("c", {test::device("d0", 1, 1 << 30), test::device("d1", 2, 1 << 30),
                                test::device("d2", 1, 1 << 30)},
                          8e6);
}

} // namespace

TEST_CASE("cost model on a hand-computed two-stage plan", "[planner][cost]") {
  auto prof = two_layers();
  auto c = three();
  plan p;
  p.batch_size = 8;
  p.micro_batches = 2; // micro-batch of 4
  p.stages.push_back({0, 1, {0, 1}, {1, 3}});
  p.stages.push_back({1, 2, {2}, {4}});
  auto steps = make_steps(p, prof, c);
  REQUIRE(steps.steps.size() == 3);
  const auto& s0 = steps.steps[0];
  // d0: 1 sample -> fwd 1 ms, bwd 2 ms; d1: 3 samples at speed 2 -> 1.5 / 3 ms.
  CHECK(s0.device_forward_s[0] == Approx(1e-3));
  CHECK(s0.device_forward_s[1] == Approx(1.5e-3));
  CHECK(s0.forward_s == Approx(1.5e-3));
  CHECK(s0.backward_s == Approx(3e-3));
  // Ring all-reduce of 1 MB in a group of 2: 2(2-1)/2 * 1e6 B / 1e6 B/s = 1 s.
  CHECK(s0.allreduce_s == Approx(1.0));
  // Boundary: 1000 B x 4 samples / 1 MB/s = 4 ms each way.
  const auto& comm = steps.steps[1];
  CHECK(comm.type == pipeline_step::kind::communication);
  CHECK(comm.forward_s == Approx(4e-3));
  CHECK(comm.backward_s == Approx(4e-3));
  // As the runtime sends it: d0's 1 row and d1's 3 rows leave at once, on
  // links of their own: the 3-row piece takes 3 ms.
  const auto pieces = make_steps(p, prof, c, boundary_pricing::pieces);
  CHECK(pieces.steps[1].forward_s == Approx(3e-3));
  CHECK(pieces.steps[1].backward_s == Approx(3e-3));
  CHECK(pieces.steps[0].forward_s == s0.forward_s);
  // Stage 1: 4 samples x (2 + 4) ms = 8 + 16 ms, no all-reduce.
  CHECK(steps.steps[2].forward_s == Approx(8e-3));
  CHECK(steps.steps[2].backward_s == Approx(16e-3));
  CHECK(steps.steps[2].allreduce_s == 0.0);
  // Dominant step m = 2 (24 ms), M = 2, tail = 0:
  //   s=0: 0 + 2*24 + (4.5 + 8) + 1000 = 1060.5 ms
  //   s=1: 1.5 + 2*24 + 8           =   57.5 ms
  //   s=2: 5.5 + 2*24               =   53.5 ms
  CHECK(round_latency(steps) == Approx(1.0605));
  evaluate(p, prof, c);
  CHECK(p.predicted_round_s == Approx(1.0605));
  CHECK(p.predicted_samples_per_s == Approx(8 / 1.0605));
  // Memory: stage 0 has K = min(2-0, 2) = 2 micro-batches in flight; fixed
  // = weights 1 MB + gradients 1 MB + optimizer 1 MB; activations per
  // sample = input 500 + layer output 1000.
  CHECK(p.predicted_memory_bytes[0] == 3'000'000 + 2 * 1500 * 1);
  CHECK(p.predicted_memory_bytes[1] == 3'000'000 + 2 * 1500 * 3);
  // Stage 1: K = 1; fixed 6 MB; activations 1000 (input) + 10 (output).
  CHECK(p.predicted_memory_bytes[2] == 6'000'000 + 1 * 1010 * 4);
  CHECK(fits_memory(p, c));
  c.devices[2].memory_bytes = 6'000'000;
  CHECK_FALSE(fits_memory(p, c));
  CHECK_THROWS_WITH(check_memory(p, c), Catch::Contains("device 2 (d2)") &&
                                          Catch::Contains("short by 4040 bytes"));
}

TEST_CASE("the update after the all-reduce: every replica steps its optimizer over its "
          "stage's weights, at its own speed", "[planner][cost]") {
  auto prof = two_layers();
  prof.layers[0].optimizer_step_s = 3e-3;
  prof.layers[1].optimizer_step_s = 4e-3;
  auto c = three();
  plan p;
  p.batch_size = 8;
  p.micro_batches = 2;
  p.stages.push_back({0, 1, {0, 1}, {1, 3}});
  p.stages.push_back({1, 2, {2}, {4}});
  auto steps = make_steps(p, prof, c);
  // Stage 0, group of two: 3 ms on d0 (speed 1), 1.5 ms on d1 (speed 2).
  const auto& s0 = steps.steps[0];
  REQUIRE(s0.device_update_s.size() == 2);
  CHECK(s0.device_update_s[0] == Approx(3e-3));
  CHECK(s0.device_update_s[1] == Approx(1.5e-3));
  CHECK(s0.update_s == Approx(3e-3));
  CHECK(s0.end_of_round_s() == Approx(1.003));
  CHECK(update_s(cost_tables(prof, 4), c, 0, 1, {0, 1}) == Approx(3e-3));
  // Stage 1, one device, no all-reduce: its step all the same.
  CHECK(steps.steps[2].update_s == Approx(4e-3));
  CHECK(update_s(cost_tables(prof, 4), c, 1, 2, {2}) == Approx(4e-3));
  // The ring ends the round (the hand-computed 1.0605 s above), stage 0's
  // update follows it on d0; stage 1's ended long before.
  CHECK(round_latency(steps) == Approx(1.0635));
  evaluate(p, prof, c);
  CHECK(p.predicted_round_s == Approx(1.0635));
  // The simulator runs it as the optimizer_step of each replica.
  auto without = two_layers();
  const auto before = simulate(p, make_steps(p, without, c), schedule_kind::one_f_one_b);
  const auto after = simulate(p, steps, schedule_kind::one_f_one_b);
  CHECK(after.round_s - before.round_s == Approx(3e-3));
  // A profile without the times prices as before.
  CHECK(make_steps(p, without, c).steps[0].update_s == 0.0);
  // range_profile sums them, as a stage computing both layers would.
  const auto both = range_profile(prof, 0, 2);
  CHECK(both.optimizer_step_s == Approx(7e-3));
}

TEST_CASE("pieces_transfer_s: each sender's rows go to the receivers that hold them, in "
          "parallel, and a device in both groups keeps its own", "[planner][cost]") {
  // Four devices, 1 MB/s links except 0 -> 3 at 0.5 MB/s, latency 1 ms.
  auto c = cluster::uniform("c", {test::device("d0", 1, 1 << 30), test::device("d1", 1, 1 << 30),
                                  test::device("d2", 1, 1 << 30), test::device("d3", 1, 1 << 30)},
                            8e6, 1e-3);
  c.bandwidth_Bps[0][3] = 0.5e6;
  // Rows 0-2 on d0, 3 on d1; receivers: 0-1 on d2, 2-3 on d3. Pieces
  // d0->d2 2 rows, d0->d3 1 row (slow link), d1->d3 1 row; 1000 B a row.
  const double t = pieces_transfer_s(c, {0, 1}, {3, 1}, {2, 3}, {2, 2}, 1000.0,
                                     traffic::activations);
  CHECK(t == Approx(2e-3 + 1e-3)); // d0 -> d2 and d0 -> d3 both take 2 ms
  // The whole micro-batch over the slowest link would take 4 rows / 0.5 MB/s.
  CHECK(transfer_s(c, {0, 1}, {2, 3}, 4000.0, traffic::activations) == Approx(8e-3 + 1e-3));
  // A device in both groups keeps its rows: only d0's 2 rows to d2 move.
  CHECK(pieces_transfer_s(c, {0, 1}, {2, 2}, {2, 1}, {2, 2}, 1000.0, traffic::activations)
        == Approx(2e-3 + 1e-3));
  CHECK(pieces_transfer_s(c, {0, 1}, {2, 2}, {0, 1}, {2, 2}, 1000.0, traffic::gradients) == 0.0);
  CHECK(pieces_transfer_s(c, {0}, {4}, {1}, {4}, 0.0, traffic::activations) == 0.0);
}

TEST_CASE("round latency of one stage is M*(f+b) plus the all-reduce", "[planner][cost]") {
  pipeline_steps ps;
  ps.micro_batches = 4;
  pipeline_step s;
  s.forward_s = 1.0;
  s.backward_s = 2.0;
  s.allreduce_s = 0.5;
  ps.steps.push_back(s);
  CHECK(round_latency(ps) == Approx(4 * 3.0 + 0.5));
}

TEST_CASE("with one micro-batch the round is the sum of all steps", "[planner][cost]") {
  // Two equal stages and a link; the first stage dominates on a tie. The
  // background formula without the tail term would give 3 s here.
  pipeline_steps ps;
  ps.micro_batches = 1;
  pipeline_step a;
  a.forward_s = 1;
  a.backward_s = 2;
  pipeline_step c;
  c.type = pipeline_step::kind::communication;
  c.forward_s = 0.5;
  c.backward_s = 0.5;
  ps.steps = {a, c, a};
  CHECK(round_latency(ps) == Approx(3 + 1 + 3));
  // M = 3: 1F1B lets stage 0 hold two micro-batches, and their round trip
  // (3 + 1 + 3 = 7 s) paces the pipeline at 3.5 s per micro-batch, not at
  // the 3 s of its busiest step: SFB + (M-1) * 3.5 = 7 + 7 = 14 (the
  // simulator agrees: stage 0's last backward runs [12, 14]).
  ps.micro_batches = 3;
  CHECK(round_latency(ps) == Approx(14));
}

TEST_CASE("in-flight micro-batches follow 1F1B", "[planner][cost]") {
  CHECK(in_flight_micro_batches(0, 4, 8) == 4);
  CHECK(in_flight_micro_batches(3, 4, 8) == 1);
  CHECK(in_flight_micro_batches(0, 4, 2) == 2);
}

TEST_CASE("pipeline_summary reproduces round_latency", "[planner][cost]") {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (int trial = 0; trial < 2000; ++trial) {
    int P = 1 + static_cast<int>(rng() % 6);
    pipeline_steps ps;
    for (int s = 0; s < P; ++s) {
      pipeline_step st;
      st.forward_s = u(rng);
      st.backward_s = 2 * u(rng);
      st.allreduce_s = rng() % 2 ? 3 * u(rng) : 0.0;
      // Ties on purpose now and then.
      if (s > 0 && rng() % 5 == 0) {
        st.forward_s = ps.steps[0].forward_s;
        st.backward_s = ps.steps[0].backward_s;
      }
      ps.steps.push_back(st);
      if (s + 1 < P) {
        pipeline_step cm;
        cm.type = pipeline_step::kind::communication;
        cm.forward_s = cm.backward_s = rng() % 3 ? 0.5 * u(rng) : 2 * u(rng);
        ps.steps.push_back(cm);
      }
    }
    const auto& st = ps.steps;
    for (int M : {1, 2, 3, 5, 16}) {
      auto sum = pipeline_summary::stage(st.back().forward_s, st.back().backward_s,
                                         st.back().end_of_round_s(), M);
      for (int k = static_cast<int>(st.size()) - 3; k >= 0; k -= 2)
        sum = sum.prepend(st[k].forward_s, st[k].backward_s, st[k].end_of_round_s(),
                          st[k + 1].forward_s, st[k + 1].backward_s);
      ps.micro_batches = M;
      INFO("trial " << trial << " P " << P << " M " << M);
      REQUIRE(sum.latency() == Approx(round_latency(ps)).epsilon(1e-12));
    }
  }
}

TEST_CASE("cost tables match direct sums over layers", "[planner][cost]") {
  std::mt19937_64 rng(11);
  auto inst = test::make_random_instance(rng, 8, 3);
  const auto& prof = inst.profile;
  cost_tables t(prof, 8);
  for (int a = 0; a < prof.num_layers(); ++a)
    for (int e = a + 1; e <= prof.num_layers(); ++e)
      for (int64_t y : {1, 3, 8, 11}) { // 11 is past the table: slow path
        double f = 0, b = 0;
        int64_t stash = prof.layers[a].output_bytes_per_sample * 0 +
                        (a == 0 ? prof.input_bytes_per_sample
                                : prof.layers[a - 1].output_bytes_per_sample);
        int64_t work = 0, fixed = 0, snapshot = 0;
        for (int l = a; l < e; ++l) {
          f += prof.layers[l].forward_time(static_cast<double>(y));
          b += prof.layers[l].backward_time(static_cast<double>(y));
          stash += prof.layers[l].stash_bytes_per_sample();
          work = std::max(work, prof.layers[l].working_bytes_per_sample);
          fixed += 2 * prof.layers[l].param_bytes + prof.layers[l].optimizer_state_bytes;
          snapshot += prof.layers[l].param_bytes + prof.layers[l].optimizer_state_bytes;
        }
        CHECK(t.forward_s(a, e, y) == Approx(f));
        CHECK(t.backward_s(a, e, y) == Approx(b));
        CHECK(t.activation_bytes_per_sample(a, e) == stash);
        CHECK(t.working_bytes_per_sample(a, e) == work);
        CHECK(t.snapshot_bytes(a, e) == snapshot);
        CHECK(t.memory_bytes(a, e, y, 3) == fixed + y * (3 * stash + work));
      }
}

TEST_CASE("with state snapshots, a stage's memory is the larger of its activations during a "
          "step and its snapshot's copy between steps", "[planner][cost]") {
  model_profile p;
  p.model = "two";
  p.input_bytes_per_sample = 10;
  for (int i = 0; i < 2; ++i) {
    layer_profile l;
    l.name = "l" + std::to_string(i);
    l.batch_sizes = {1};
    l.forward_s = {1e-3};
    l.backward_s = {2e-3};
    l.output_bytes_per_sample = 10;
    l.stashed_bytes_per_sample = 30;
    l.working_bytes_per_sample = 5;
    l.param_bytes = 1000;
    l.optimizer_state_bytes = 1000;
    p.layers.push_back(l);
  }
  CHECK(cost_tables(p, 64).memory_bytes(0, 2, 4, 2) == 6000 + 4 * (2 * 70 + 5));
  p.state_snapshots = true;
  cost_tables t(p, 64);
  // Weights, gradients and momentum of both layers: 2 * (2 * 1000 + 1000).
  const int64_t fixed = 6000;
  // The snapshot copies weights and momentum: 2 * (1000 + 1000).
  CHECK(t.snapshot_bytes(0, 2) == 4000);
  // Activations per sample and micro-batch: input 10 + stashes 60 = 70, working 5.
  CHECK(t.memory_bytes(0, 2, 4, 2) == fixed + 4000); // 4 * (2 * 70 + 5) = 580 < 4000
  CHECK(t.memory_bytes(0, 2, 40, 2) == fixed + 40 * (2 * 70 + 5)); // 5800 > 4000
  // A budget that cannot hold the snapshot's copy fits no share at all.
  CHECK(t.max_share_within(0, 2, 2, fixed + 3999, 64) == -1);
  CHECK(t.max_share_within(0, 2, 2, fixed + 4000, 64) == 4000 / 145);
}

TEST_CASE("range_profile: a stage's layers as one, sampled where any layer was",
          "[planner][cost]") {
  model_profile p = two_layers();
  // Layer 1 sampled at other sizes, with an intercept: the sum must follow
  // both layers between every sample.
  p.layers[1].batch_sizes = {2, 8};
  p.layers[1].forward_s = {0.010, 0.022};
  p.layers[1].backward_s = {0.020, 0.050};
  auto r = range_profile(p, 0, 2);
  CHECK(r.batch_sizes == std::vector<int64_t>{1, 2, 8, 16});
  for (double b : {1.0, 2.0, 3.0, 5.0, 8.0, 16.0, 32.0}) {
    INFO("batch " << b);
    CHECK(r.forward_time(b)
          == Approx(p.layers[0].forward_time(b) + p.layers[1].forward_time(b)));
    CHECK(r.backward_time(b)
          == Approx(p.layers[0].backward_time(b) + p.layers[1].backward_time(b)));
  }
  CHECK(r.param_bytes == 3'000'000);
  CHECK(r.optimizer_state_bytes == 3'000'000);
  CHECK(r.output_bytes_per_sample == 10);
  auto one = range_profile(p, 1, 2);
  CHECK(one.batch_sizes == p.layers[1].batch_sizes);
  CHECK(one.forward_s == p.layers[1].forward_s);
  CHECK_THROWS_WITH(range_profile(p, 1, 1), Catch::Contains("layers 1-1"));
  CHECK_THROWS_WITH(range_profile(p, 0, 3), Catch::Contains("of 2 layers"));
}
