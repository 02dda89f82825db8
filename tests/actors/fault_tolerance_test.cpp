// Fault tolerance on loopback node processes (issue #5): a device killed or
// hung mid-job is detected, the plan is patched or re-made, the lost layers
// come back from replicas, the interrupted mini-batch is replayed, and the
// final weights equal a fault-free single-device run.
// Ports 27400-27499; every case runs under the target's hard timeout.
#include "job_test_helpers.hpp"

#include <catch2/catch.hpp>

#include <fcntl.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <atomic>
#include <cstdlib>
#include <map>
#include <random>
#include <set>
#include <thread>

#include <signal.h>
#include <sys/wait.h>

using namespace asteroid;
using namespace asteroid::test;

namespace {

/// A step in [lo, hi] that differs run to run (printed, so a failure can be
/// replayed with ASTEROID_FAULT_STEP=N): the property must hold at any step.
int64_t random_step(int64_t lo, int64_t hi) {
  if (const char* fixed = std::getenv("ASTEROID_FAULT_STEP"))
    return std::clamp<int64_t>(std::atoll(fixed), lo, hi);
  std::random_device rd;
  return std::uniform_int_distribution<int64_t>(lo, hi)(rd);
}

const json* find_event(const actors::job_result& r, const std::string& what) {
  for (auto& e : r.fault_events)
    if (e["event"] == what)
      return &e;
  return nullptr;
}

actors::fault_spec fault(int node, int64_t step, const std::string& action,
                         int64_t delay_ms = 20) {
  actors::fault_spec f;
  f.node = node;
  f.step = step;
  f.action = action;
  f.delay_ms = delay_ms;
  return f;
}

/// Checks a job that lost `node` while it first deployed: every step ran,
/// the weights equal single-device training; returns the loss's record.
const json* lost_before_step_0(const actors::job_result& r, const actors::job_spec& job,
                               const data::dataset& train, const std::string& node) {
  CHECK(r.steps == job.max_steps);
  auto diff = max_abs_diff(r.model, reference(job, train));
  INFO("max abs diff " << diff);
  CHECK(diff < 1e-4);
  auto* lost = find_event(r, "lost_during_deployment");
  REQUIRE(lost);
  CHECK((*lost)["node"] == node);
  return lost;
}

/// Runs `job` on a fresh cluster, compares with the single-device run and
/// prints what recovery did.
actors::job_result run_and_compare(actors::job_spec job, int nodes,
                                   uint16_t port, const std::string& label,
                                   int reference_accumulate = 1) {
  actors::local_cluster cluster{cluster_options(nodes, port)};
  auto train = synthetic(job.batch_size * job.max_steps);
  auto r = run_on_cluster(job, cluster, train);
  CHECK(r.steps == job.max_steps);
  auto diff = max_abs_diff(r.model, reference(job, *train, reference_accumulate));
  INFO(label << ": max abs diff " << diff);
  CHECK(diff < 1e-4);
  auto* detected = find_event(r, "detected");
  auto* recovered = find_event(r, "recovered");
  auto* resumed = find_event(r, "resumed");
  REQUIRE(detected);
  REQUIRE(recovered);
  REQUIRE(resumed);
  std::printf("[%s] max abs diff %.3g; detected in %.3f s (%s), recovered "
              "(%s) in %.3f s replaying %lld step(s), first step done %.3f s "
              "after the fault\n",
              label.c_str(), diff, detected->value("detect_s", -1.0),
              (*detected)["reason"].get<std::string>().c_str(),
              (*recovered)["mode"].get<std::string>().c_str(),
              (*recovered)["recover_s"].get<double>(),
              static_cast<long long>((*recovered)["replayed_steps"].get<int64_t>() + 1),
              resumed->value("since_fault_s", -1.0));
  return r;
}

/// cnn (conv1, conv2, fc1, classifier) over 4 devices: stage 0 on devices 0
/// and 1 (5 + 3 rows), fc1 on device 2, the classifier on device 3.
actors::job_spec cnn_three_stage_job() {
  auto job = base_job("cnn", make_plan(16, 2, {{0, 2, {0, 1}, {5, 3}},
                                              {2, 3, {2}, {8}},
                                              {3, 4, {3}, {8}}}));
  job.optimizer.lr = 0.02;
  job.max_steps = 16;
  return job;
}

/// cnn on 3 devices, stage 0 on devices 0 and 1 (4 + 4 rows), the rest on
/// device 2, with the planner for re-planning (drift, memory).
actors::job_spec cnn_replanning_job(int64_t steps) {
  auto job = base_job("cnn", make_plan(16, 2, {{0, 2, {0, 1}, {4, 4}},
                                              {2, 4, {2}, {8}}}));
  job.planner = "asteroid"; // re-planning needs the planner
  job.optimizer.lr = 0.02;
  job.max_steps = steps;
  return job;
}

} // namespace

TEST_CASE("data-plane connections broken mid-step heal: no recovery, and the "
          "weights equal single-device training (cnn, 3 stages, 4 processes)") {
  // Every node's connections break, one node at a time, in the middle of
  // steps: activations, gradients, all-reduce chunks and snapshots under
  // way are written again on new connections, none delivered twice.
  auto job = cnn_three_stage_job();
  for (int node = 0; node < 4; ++node)
    for (int64_t delay : {2, 10, 25})
      job.faults.push_back(fault(node, 1 + 3 * node + delay / 10, "reset", delay));
  auto opts = cluster_options(4, 27414);
  // Paced links (emulated 100 Mbit/s): frames spend long enough on the wire
  // for the resets to catch some of them under way.
  opts.link_rates_mbps = {100};
  std::filesystem::remove_all(opts.log_dir);
  auto train = synthetic(job.batch_size * job.max_steps);
  actors::job_result r;
  {
    actors::local_cluster cluster{opts};
    r = run_on_cluster(job, cluster, train);
  }
  CHECK(r.steps == job.max_steps);
  auto diff = max_abs_diff(r.model, reference(job, *train));
  INFO("max abs diff " << diff);
  CHECK(diff < 1e-4);
  int injected = 0;
  for (auto& e : r.fault_events) {
    INFO(e.dump());
    CHECK(e["event"] == "injected");
    CHECK(e["action"] == "reset");
    injected += e["event"] == "injected";
  }
  CHECK(injected == 12);
  CHECK(r.plan.num_stages() == 3);
  // The resets caught frames under way (the nodes' own counts, logged when
  // the job released them): the healing was exercised, not just survived.
  int64_t resent = 0;
  std::regex counts{R"(data plane so far: .* (\d+) written again)"};
  for (int node = 0; node < 4; ++node) {
    std::ifstream log{opts.log_dir + "/node" + std::to_string(node) + ".log"};
    std::string line;
    std::smatch m;
    int64_t last = 0; // the counts are since the node started: the last line
    while (std::getline(log, line))
      if (std::regex_search(line, m, counts))
        last = std::stoll(m[1]);
    resent += last;
  }
  CHECK(resent > 0);
  std::printf("[reset] 12 connection resets, %lld frames written again, no "
              "recovery, max abs diff %.3g\n",
              static_cast<long long>(resent), diff);
}

TEST_CASE("a killed device of a replicated stage: the job finishes with the "
          "fault-free weights (mlp, 4 processes)") {
  auto step = random_step(2, 14);
  INFO("kill at step " << step);
  auto job = base_job("mlp", make_plan(16, 2, {{0, 2, {0, 1}, {3, 5}},
                                               {2, 3, {2, 3}, {6, 2}}}));
  job.faults = {fault(1, step, "kill")};
  auto r = run_and_compare(job, 4, 27400, "kill replicated, step "
                                            + std::to_string(step));
  // Only stage 0's group changed: device 1 left it, device 0 took its share.
  REQUIRE(r.plan.num_stages() == 2);
  CHECK(r.plan.stages[0].devices == std::vector<int>{0});
  CHECK(r.plan.stages[0].shares == std::vector<int64_t>{8});
  CHECK(r.plan.stages[1].devices == std::vector<int>{2, 3});
  CHECK((*find_event(r, "recovered"))["mode"] == "replay");
}

TEST_CASE("a killed device of one stage: the replicas that lost nothing keep "
          "running as the same actors, their state kept or rolled back to the "
          "replay's start, and the weights equal the fault-free run (cnn, 3 "
          "stages, 4 processes)") {
  auto step = random_step(2, 12);
  INFO("kill at step " << step);
  // conv1 on device 0, conv2 + fc1 on devices 1 and 2, the classifier on 3.
  auto job = base_job("cnn", make_plan(16, 2, {{0, 1, {0}, {8}},
                                              {1, 3, {1, 2}, {5, 3}},
                                              {3, 4, {3}, {8}}}));
  job.optimizer.lr = 0.02;
  job.max_steps = 16;
  // At the step's start: no replica can have finished the step (each one
  // needs device 2's rows), so none has to roll back.
  job.faults = {fault(2, step, "kill", 0)};
  auto r = run_and_compare(job, 4, 27455, "kill in the middle stage, step "
                                            + std::to_string(step));
  REQUIRE(r.plan.num_stages() == 3);
  CHECK(r.plan.stages[1].devices == std::vector<int>{1});
  // The actor behind every replica label, per step.
  auto actor_of = [&](int64_t at, const std::string& prefix) -> int64_t {
    for (auto& rep : r.iterations.at(static_cast<size_t>(at))["replicas"])
      if (rep["replica"].get<std::string>().rfind(prefix, 0) == 0)
        return rep["actor"].get<int64_t>();
    return -1;
  };
  for (std::string who : {"s0r0@", "s1r0@", "s2r0@"}) {
    INFO(who);
    auto before = actor_of(0, who);
    CHECK(before > 0);
    CHECK(actor_of(job.max_steps - 1, who) == before);
  }
  auto* recovered = find_event(r, "recovered");
  REQUIRE(recovered);
  CHECK((*recovered)["mode"] == "replay");
  // Snapshots travel to their nodes asynchronously: when the step's own had
  // not reached a live node by the loss, the replay starts at the newest
  // complete one, and the replicas that finished the steps after it roll
  // back to it; otherwise nothing is replayed before the step and every
  // kept replica keeps its state as it was.
  const auto failed = (*recovered)["failed_step"].get<int64_t>();
  const auto resume = (*recovered)["resume_step"].get<int64_t>();
  CHECK(failed == step);
  CHECK(resume <= failed);
  const int64_t expected_restore = resume == failed ? -1 : resume;
  std::set<std::string> kept;
  for (auto& k : (*recovered)["kept"]) {
    INFO(k.dump() << ", resume step " << resume);
    CHECK(k["restored_version"] == expected_restore);
    kept.insert(k["replica"].get<std::string>().substr(0, 5));
  }
  CHECK(kept == std::set<std::string>{"s0r0@", "s1r0@", "s2r0@"});
  // Every stage kept its layers, so every stage actor stayed: stage 1's
  // moved its group onto the survivor, the others were not touched.
  const auto& first_stage_actors = r.iterations.front()["stage_actors"];
  REQUIRE(first_stage_actors.size() == 3);
  CHECK(r.iterations.back()["stage_actors"] == first_stage_actors);
  REQUIRE((*recovered)["stage_actors"].size() == 3);
  for (auto& a : (*recovered)["stage_actors"]) {
    CHECK(a["reused"] == true);
    CHECK(a["actor"] == first_stage_actors[a["stage"].get<size_t>()]);
  }
  // What was in flight where, as the step's micro-batch actors told the
  // recovery: device 2 died before it could run a pass, so both micro-batches
  // of the interrupted step were still in the pipeline, neither had passed
  // stage 1 (device 2 holds 3 of its 8 rows), and each waited on a forward
  // pass at stage 0 (if the loss was seen that early, or the replicas had
  // not reported yet: the record says after how long a wait they report)
  // or on device 2's.
  CHECK((*recovered)["micro_batch_report_ms"] == job.micro_batch_report_ms);
  std::set<int> in_flight;
  for (auto& w : (*recovered)["in_flight"]) {
    if (w["step"] != (*recovered)["failed_step"])
      continue; // the next step's, fed ahead
    INFO(w.dump());
    in_flight.insert(w["micro_batch"].get<int>());
    CHECK(w["backward_done"].empty());
    for (auto& s : w["forward_done"])
      CHECK(s == 0);
    REQUIRE_FALSE(w["waiting"].empty());
    bool on_device_2 = false;
    for (auto& piece : w["waiting"]) {
      CHECK(piece["pass"] == "forward");
      CHECK(piece["stage"].get<int>() <= 1);
      on_device_2 |= piece["device"] == 2;
    }
    if (w["waiting"][0]["stage"] == 1)
      CHECK(on_device_2);
  }
  CHECK(in_flight == std::set<int>{0, 1});
  std::printf("[kill in the middle stage] in flight: %s\n",
              (*recovered)["in_flight"].dump().c_str());
}

TEST_CASE("a kept replica whose BatchNorm statistics the interrupted step "
          "moved rolls back to its node's snapshot, and the weights and "
          "statistics equal the fault-free run (cnn_bn, 3 stages, 3 "
          "processes)") {
  auto step = random_step(2, 12);
  INFO("kill at step " << step);
  // Three single-device stages: both BatchNorm layers (conv1, conv2) on
  // device 0, so their statistics are per micro-batch as in the reference;
  // fc1 on device 1, the classifier on device 2. Killing device 1 merges fc1
  // into device 2, which holds its replica. No group's shares change, so
  // every layer keeps the reference's summation order: a share change would
  // perturb the weights by ~1e-8, which this model's trajectory amplified
  // to 2e-4 by step 16 after a kill at step 4 (without any fault the two
  // share splits each stay within 4e-7 of the reference).
  auto job = base_job("cnn_bn", make_plan(16, 2, {{0, 2, {0}, {8}},
                                                 {2, 3, {1}, {8}},
                                                 {3, 4, {2}, {8}}}));
  job.optimizer.lr = 0.02;
  job.max_steps = 16;
  // 20 ms into the step: device 0, emulated 8 times slower from step 0 on,
  // has begun its forward passes of the step and not finished the step.
  auto slow = fault(0, 0, "slow", 0);
  slow.slowdown = 8;
  job.faults = {slow, fault(1, step, "kill", 20)};
  // BatchNorm statistics per micro-batch: the reference accumulates over
  // the 2 micro-batches.
  auto r = run_and_compare(job, 3, 27465,
                           "kill beside a BatchNorm stage, step " + std::to_string(step),
                           2);
  REQUIRE(r.plan.num_stages() == 2);
  CHECK(r.plan.stages[1].devices == std::vector<int>{2});
  auto* recovered = find_event(r, "recovered");
  REQUIRE(recovered);
  std::map<std::string, int64_t> restored;
  for (auto& k : (*recovered)["kept"])
    restored[k["replica"].get<std::string>().substr(0, 5)] = k["restored_version"];
  // s0r0 is kept and rolled back to the replay version; the merged stage's
  // replica is new (its layers changed).
  REQUIRE(restored.size() == 1);
  REQUIRE(restored.count("s0r0@"));
  CHECK(restored["s0r0@"] == (*recovered)["resume_step"].get<int64_t>());
  // Stage 0's layers stayed, and so did its stage actor; the merged range
  // is a new stage, with an actor of its own.
  const auto& stage_actors = (*recovered)["stage_actors"];
  REQUIRE(stage_actors.size() == 2);
  CHECK(stage_actors[0]["reused"] == true);
  CHECK(stage_actors[0]["actor"] == r.iterations.front()["stage_actors"][0]);
  CHECK(stage_actors[1]["reused"] == false);
  CHECK(stage_actors[1]["layers"] == "L2-4");
}

TEST_CASE("a killed device that is a whole stage: its layers merge into the "
          "neighbour holding their replica (mlp, 4 processes)") {
  auto step = random_step(2, 14);
  INFO("kill at step " << step);
  auto job = base_job("mlp", make_plan(16, 2, {{0, 1, {0, 1}, {3, 5}},
                                               {1, 2, {2}, {8}},
                                               {2, 3, {3}, {8}}}));
  job.faults = {fault(2, step, "kill")};
  auto r = run_and_compare(job, 4, 27410, "kill single-device stage, step "
                                            + std::to_string(step));
  REQUIRE(r.plan.num_stages() == 2);
  CHECK(r.plan.stages[1].first_layer == 1);
  CHECK(r.plan.stages[1].end_layer == 3);
  CHECK(r.plan.stages[1].devices == std::vector<int>{3});
}

TEST_CASE("stage states larger than one message piece go to their nodes as "
          "data-plane frames or in pieces, and are copied node to node (mlp 1024-512, "
          "3 processes)") {
  // Stage 0's weights (784 x 1024) and stage 1's weights and momentum are
  // several pieces each (state_uploads.hpp). With data planes the first
  // deployment sends each member its stage's state as one frame from the
  // supervisor's process (send_states), without them in pieces over CAF.
  // The killed device is stage 1, whose layers then merge into stage 0:
  // one member restores them from its node's backup, the other gets the
  // backup copied over the data plane from that node (snapshot_copies.hpp),
  // or, without a data plane, fetched by the supervisor and shipped, in
  // pieces.
  auto step = random_step(2, 10);
  INFO("kill at step " << step);
  auto job = base_job("mlp", make_plan(16, 2, {{0, 1, {0, 1}, {3, 5}},
                                               {1, 3, {2}, {8}}}));
  job.model_options = {{"hidden_sizes", {1024, 512}}};
  job.max_steps = 12;
  job.faults = {fault(2, step, "kill")};
  uint16_t port = 27435;
  int copies = 1, sent_at_start = 3, fetched = 0;
  int shipped_to[2] = {0, 0};
  SECTION("data-plane frames, copied node to node") {}
  SECTION("without a data plane: in pieces, fetched and shipped") {
    job.data_plane = false;
    port = 27510;
    copies = 0;
    sent_at_start = 0;
    shipped_to[0] = 1; // the first deployment's stage 0
    shipped_to[1] = 2; // that, and the merged stage's after the kill
    // Layer 0's snapshot, then layers 1 and 2 one by one: over CAF the
    // backup got stage 1's snapshot (2 layers, over 1 MiB) layer by layer.
    fetched = 3;
  }
  job.metrics_path = std::string(ASTEROID_TEST_TMP) + "/ft-pieces-" + std::to_string(port)
                     + ".jsonl";
  std::filesystem::remove(job.metrics_path);
  auto r = run_and_compare(job, 3, port, "pieces, kill at step " + std::to_string(step));
  REQUIRE(r.plan.num_stages() == 1);
  CHECK(r.plan.stages[0].devices.size() == 2);
  auto* recovered = find_event(r, "recovered");
  REQUIRE(recovered);
  // Recovery resumes from the newest step whose snapshots the live nodes
  // hold between them, and the kill may halt a node before its own snapshot
  // of that step has landed (seen in CI, kill at step 5). Then what it lacks
  // comes from the other node too: with data planes a second copy, without
  // them node 0's merged stage is shipped as well. Nothing is shipped with
  // data planes either way.
  const int copied = (*recovered)["copied_snapshots"].get<int>();
  CHECK(copied >= copies);
  CHECK(copied <= 2 * copies);
  CHECK((*recovered)["states_sent"] == 0);
  CHECK((*recovered)["fetched_snapshots"] == fetched);
  auto starts = records_of(job.metrics_path, "start");
  REQUIRE(starts.size() == 1);
  CHECK(starts[0]["states_sent"] == sent_at_start);
  // With data planes the supervisor also fed every step's inputs and
  // labels over its own: beyond the 3 states, at least 2 replicas x 2
  // micro-batches of inputs and 2 of labels per step.
  auto done = records_of(job.metrics_path, "done");
  REQUIRE(done.size() == 1);
  if (sent_at_start > 0)
    CHECK(done[0]["data_plane_frames_out"].get<int64_t>() >= 3 + 6 * job.max_steps);
  else
    CHECK(done[0]["data_plane_frames_out"] == 0);
  int shipped[2] = {0, 0};
  for (int node = 0; node < 2; ++node) {
    std::ifstream log{std::string(ASTEROID_TEST_TMP) + "/actors-" + std::to_string(port)
                      + "/node" + std::to_string(node) + ".log"};
    std::string line;
    while (std::getline(log, line))
      shipped[node] += line.find("s0r" + std::to_string(node) + "@") != std::string::npos
                       && line.find("sent in pieces") != std::string::npos;
  }
  CHECK(shipped[0] >= shipped_to[0]);
  CHECK(shipped[0] <= shipped_to[1]);
  CHECK(shipped[1] == shipped_to[1]);
  std::filesystem::remove(job.metrics_path);
}

TEST_CASE("two devices lost at once recover too (cnn, 4 processes)") {
  auto step = random_step(2, 12);
  INFO("kill at step " << step);
  // Device 1 (stage 0 member) and device 3 (all of stage 2) die together;
  // neither holds the other's replica.
  auto job = cnn_three_stage_job();
  job.faults = {fault(1, step, "kill", 10), fault(3, step, "kill", 10)};
  auto r = run_and_compare(job, 4, 27420, "two killed, step "
                                            + std::to_string(step));
  REQUIRE(r.plan.num_stages() == 2);
  CHECK(r.plan.stages[0].devices == std::vector<int>{0});
  CHECK(r.plan.stages[1].devices == std::vector<int>{2});
  CHECK(r.plan.stages[1].end_layer == 4);
}

TEST_CASE("a device lost while a recovery deploys: the recovery plans again "
          "without it and the job still ends with the fault-free weights "
          "(cnn, 4 processes)") {
  auto step = random_step(2, 12);
  INFO("first kill at step " << step);
  // Device 1 dies in a step; device 3 dies as the recovery starts deploying
  // the patched plan, which still holds it, so the deployment (not the
  // inventory round before it) loses it.
  auto job = cnn_three_stage_job();
  auto second = fault(3, step, "kill");
  second.when = "recovery";
  job.faults = {fault(1, step, "kill", 10), second};
  auto r = run_and_compare(job, 4, 27485, "kill during recovery, step "
                                            + std::to_string(step));
  auto* lost = find_event(r, "lost_during_deployment");
  REQUIRE(lost);
  CHECK((*lost)["node"] == "node3");
  CHECK((*lost)["step"] == step);
  REQUIRE(r.plan.num_stages() == 2);
  CHECK(r.plan.stages[0].devices == std::vector<int>{0});
  CHECK(r.plan.stages[1].devices == std::vector<int>{2});
  CHECK(r.plan.stages[1].end_layer == 4);
}

TEST_CASE("a device lost during the first deployment, killed or hung "
          "(SIGSTOP): the plan is patched around it before step 0 (mlp, 4 "
          "processes)") {
  auto job = base_job("mlp", make_plan(16, 2, {{0, 2, {0, 1}, {3, 5}},
                                               {2, 3, {2, 3}, {6, 2}}}));
  auto at_start = fault(3, 0, "kill");
  at_start.when = "start";
  uint16_t port = 27475;
  SECTION("killed: its connection closes") {}
  SECTION("hung: found by heartbeats within interval x misses + 1 s, not by "
          "the deployment's timeout") {
    at_start.action = "stop";
    job.fault_tolerance.heartbeat_ms = 200;
    job.fault_tolerance.heartbeat_misses = 3;
    port = 27500;
  }
  job.faults = {at_start};
  actors::local_cluster cluster{cluster_options(4, port)};
  auto train = synthetic(job.batch_size * job.max_steps);
  auto r = run_on_cluster(job, cluster, train);
  if (at_start.action == "stop")
    ::kill(cluster.pids()[3], SIGCONT); // let it exit cleanly
  auto* lost = lost_before_step_0(r, job, *train, "node3");
  REQUIRE(r.plan.num_stages() == 2);
  CHECK(r.plan.stages[1].devices == std::vector<int>{2});
  CHECK(r.plan.stages[1].shares == std::vector<int64_t>{8});
  if (at_start.action == "stop") {
    CHECK_THAT((*lost)["reason"].get<std::string>(), Catch::Contains("no heartbeat"));
    auto detect_s = lost->value("detect_s", 99.0);
    std::printf("[sigstop at deployment] detected after %.3f s (bound %.3f s)\n",
                detect_s, 0.2 * 3 + 1.0);
    CHECK(detect_s <= 0.2 * 3 + 1.0);
  }
}

TEST_CASE("a device lost while its stage's state goes to it in pieces: the plan "
          "is patched around it before step 0 (mlp 1024-512, 3 processes)") {
  // The kill lands as the first deployment begins, whose stage states
  // (3.2 MB and 2.1 MB) go to their nodes in pieces (state_uploads.hpp):
  // what was sent to the lost node is abandoned with that deployment, and
  // the patched plan's states go in pieces again.
  auto job = base_job("mlp", make_plan(16, 2, {{0, 1, {0, 1}, {3, 5}},
                                               {1, 3, {2}, {8}}}));
  job.model_options = {{"hidden_sizes", {1024, 512}}};
  job.max_steps = 6;
  job.data_plane = false; // with data planes the states go as frames instead
  auto at_start = fault(1, 0, "kill");
  at_start.when = "start";
  job.faults = {at_start};
  actors::local_cluster cluster{cluster_options(3, 27445)};
  auto train = synthetic(job.batch_size * job.max_steps);
  auto r = run_on_cluster(job, cluster, train);
  lost_before_step_0(r, job, *train, "node1");
  REQUIRE(r.plan.num_stages() >= 1);
  CHECK(r.plan.stages[0].devices == std::vector<int>{0});
  CHECK_THAT(slurp(cluster.log_path(0)), Catch::Contains("sent in pieces"));
}

TEST_CASE("a hung (SIGSTOP) node is detected within interval x misses + 1 s "
          "and the job goes on without it") {
  auto job = base_job("mlp", make_plan(16, 2, {{0, 2, {0, 1}, {3, 5}},
                                               {2, 3, {2}, {8}}}));
  job.fault_tolerance.heartbeat_ms = 200;
  job.fault_tolerance.heartbeat_misses = 3;
  job.faults = {fault(1, 5, "stop", 30)};
  actors::local_cluster cluster{cluster_options(3, 27430)};
  auto train = synthetic(job.batch_size * job.max_steps);
  auto r = run_on_cluster(job, cluster, train);
  ::kill(cluster.pids()[1], SIGCONT); // let it exit cleanly
  CHECK(r.steps == job.max_steps);
  auto* detected = find_event(r, "detected");
  REQUIRE(detected);
  auto detect_s = detected->value("detect_s", 99.0);
  std::printf("[sigstop] detected after %.3f s (bound %.3f s): %s\n", detect_s,
              0.2 * 3 + 1.0, (*detected)["reason"].get<std::string>().c_str());
  CHECK(detect_s <= 0.2 * 3 + 1.0);
  CHECK_THAT((*detected)["reason"].get<std::string>(),
             Catch::Contains("no heartbeat"));
  CHECK(max_abs_diff(r.model, reference(job, *train)) < 1e-4);
}

TEST_CASE("a link cut is refused before any work for a node outside its own "
          "network namespace, naming the node") {
  // Loopback nodes report no link interface; the emulated testbed's do, and
  // tests/testbed/test_link_cut.sh cuts one mid-job.
  auto job = base_job("mlp", make_plan(16, 2, {{0, 2, {0}, {8}},
                                               {2, 3, {1}, {8}}}));
  job.faults = {fault(1, 3, "cut")};
  actors::local_cluster cluster{cluster_options(2, 27495)};
  auto train = synthetic(job.batch_size * job.max_steps);
  CHECK_THROWS_WITH(run_on_cluster(job, cluster, train),
                    Catch::Contains("faults[0] (cut)")
                      && Catch::Contains(cluster.endpoints()[1])
                      && Catch::Contains("reports no link interface"));
}

TEST_CASE("heavy re-plan, restart-from-checkpoint and replay without "
          "re-balancing recover to the same weights") {
  auto job = base_job("mlp", make_plan(16, 2, {{0, 2, {0, 1}, {3, 5}},
                                               {2, 3, {2, 3}, {6, 2}}}));
  job.max_steps = 12;
  job.faults = {fault(3, 7, "kill")};
  SECTION("replan") {
    job.fault_tolerance.recovery = "replan";
    auto r = run_and_compare(job, 4, 27440, "replan");
    CHECK((*find_event(r, "recovered"))["mode"] == "replan");
  }
  SECTION("replay without re-balancing (the Figure-17 baseline)") {
    job.fault_tolerance.recovery = "replay_no_rebalance";
    auto r = run_and_compare(job, 4, 27404, "replay_no_rebalance");
    CHECK((*find_event(r, "recovered"))["mode"] == "replay_no_rebalance");
    CHECK(r.plan.stages[1].devices == std::vector<int>{2});
    CHECK(r.plan.stages[1].shares == std::vector<int64_t>{8}); // 6 + node3's 2
  }
  SECTION("restart from checkpoint") {
    job.fault_tolerance.recovery = "restart";
    job.fault_tolerance.checkpoint_every = 5;
    job.fault_tolerance.checkpoint_path
      = std::string(ASTEROID_TEST_TMP) + "/ft-restart.ckpt";
    auto r = run_and_compare(job, 4, 27450, "restart");
    auto& rec = *find_event(r, "recovered");
    CHECK(rec["mode"] == "restart");
    CHECK(rec["resume_step"] == 5); // the checkpoint before step 7
  }
}

TEST_CASE("without recovery a lost node fails the job, naming it") {
  auto job = base_job("mlp", make_plan(16, 2, {{0, 2, {0}, {8}},
                                               {2, 3, {1}, {8}}}));
  job.fault_tolerance.recovery = "none";
  job.faults = {fault(1, 3, "kill")};
  actors::local_cluster cluster{cluster_options(2, 27460)};
  auto train = synthetic(job.batch_size * job.max_steps);
  CHECK_THROWS_WITH(run_on_cluster(job, cluster, train),
                    Catch::Contains(cluster.endpoints()[1])
                      && Catch::Contains("recovery is off"));
}

TEST_CASE("a hung node that resumes is admitted again at a mini-batch "
          "boundary and the plan is re-optimised") {
  auto job = base_job("mlp", make_plan(16, 2, {{0, 2, {0, 1}, {3, 5}},
                                               {2, 3, {2}, {8}}}));
  job.planner = "asteroid"; // re-planning on re-join needs the planner
  job.max_steps = 16;
  // 450 ms (150 x 3) once took a healthy node1 for dead in its first step
  // while CI ran another 4-node test beside this one; detection speed is
  // tested elsewhere, this test is about the re-join.
  job.fault_tolerance.heartbeat_ms = 200;
  job.fault_tolerance.heartbeat_misses = 4;
  job.faults = {fault(1, 3, "stop", 10), fault(1, 8, "cont", 0)};
  // The re-plan takes the state from the nodes' snapshots of the step
  // (here fetched from them and shipped: the new plan cuts the layers
  // elsewhere than the snapshots' ranges), or without a data plane from
  // the replicas through the supervisor's process.
  uint16_t port = 27470;
  std::string state_from = "snapshots";
  SECTION("state from the nodes' snapshots") {}
  SECTION("without a data plane: from the replicas") {
    job.data_plane = false;
    port = 27513;
    state_from = "replicas";
  }
  actors::local_cluster cluster{cluster_options(3, port)};
  auto train = synthetic(job.batch_size * job.max_steps);
  auto r = run_on_cluster(job, cluster, train);
  CHECK(r.steps == job.max_steps);
  REQUIRE(find_event(r, "detected"));
  auto* back = find_event(r, "rejoined");
  REQUIRE(back);
  std::printf("[rejoin] node back at step %lld, re-planned in %.3f s from the %s, %d "
              "snapshot(s) copied\n",
              static_cast<long long>((*back)["step"].get<int64_t>()),
              (*back)["recover_s"].get<double>(),
              (*back)["state_from"].get<std::string>().c_str(),
              (*back)["copied_snapshots"].get<int>());
  CHECK((*back)["step"].get<int64_t>() >= 8);
  CHECK((*back)["state_from"] == state_from);
  CHECK(max_abs_diff(r.model, reference(job, *train)) < 1e-4);
}

TEST_CASE("a device that becomes much slower triggers re-planning (drift), "
          "without changing the math") {
  auto job = cnn_replanning_job(18);
  actors::fault_spec slow = fault(1, 6, "slow", 0);
  slow.slowdown = 8.0;
  job.faults = {slow};
  // Emulated from the start: an emulated device's busy time is slowdown x
  // its CPU time, a real one's is wall time, and only a ratio of like with
  // like measures the 4x (wall time under a loaded host would hide it).
  auto opts = cluster_options(3, 27480);
  opts.slowdowns = {2.0, 2.0, 2.0};
  actors::local_cluster cluster{opts};
  auto train = synthetic(job.batch_size * job.max_steps);
  auto r = run_on_cluster(job, cluster, train);
  CHECK(r.steps == job.max_steps);
  auto* drift = find_event(r, "drift");
  REQUIRE(drift);
  std::printf("[drift] %s\n", drift->dump().c_str());
  CHECK((*drift)["node"] == "node1");
  CHECK((*drift)["busy_ratio"].get<double>() > 2.0);
  CHECK((*drift)["state_from"] == "snapshots");
  CHECK(max_abs_diff(r.model, reference(job, *train)) < 1e-4);
}

TEST_CASE("a node whose measured memory peak exceeds its budget triggers "
          "re-planning once, without changing the math") {
  auto job = cnn_replanning_job(12);
  // node1 comes under memory pressure from outside the job: it holds 384 MiB
  // more from step 4 on, over its 256 MiB budget (the job itself adds a few
  // MiB to each node's process).
  actors::fault_spec hog = fault(1, 4, "hog", 0);
  hog.bytes = int64_t{384} << 20;
  job.faults = {hog};
  auto opts = cluster_options(3, 27425);
  opts.memory = {int64_t{256} << 20};
  actors::local_cluster cluster{opts};
  auto train = synthetic(job.batch_size * job.max_steps);
  auto r = run_on_cluster(job, cluster, train);
  CHECK(r.steps == job.max_steps);
  auto* over = find_event(r, "over_budget");
  REQUIRE(over);
  std::printf("[over_budget] %s\n", over->dump().c_str());
  CHECK((*over)["node"] == "node1");
  CHECK((*over)["budget_bytes"] == int64_t{256} << 20);
  CHECK((*over)["peak_bytes"].get<int64_t>() > int64_t{384} << 20);
  CHECK((*over)["planning_budget_bytes"].get<int64_t>() < int64_t{256} << 20);
  CHECK((*over)["step"].get<int64_t>() >= 5);
  // The high-water mark stays: the same overshoot does not re-plan again.
  CHECK(std::count_if(r.fault_events.begin(), r.fault_events.end(),
                      [](const json& e) { return e["event"] == "over_budget"; })
        == 1);
  CHECK(max_abs_diff(r.model, reference(job, *train)) < 1e-4);
}

TEST_CASE("a killed node restarted at its endpoint is reconnected and "
          "admitted again") {
  auto job = base_job("mlp", make_plan(16, 2, {{0, 2, {0, 1}, {3, 5}},
                                               {2, 3, {2}, {8}}}));
  job.planner = "asteroid"; // re-planning on re-join needs the planner
  job.max_steps = 1500;
  job.epochs = 40;
  job.metrics_path = std::string(ASTEROID_TEST_TMP) + "/ft-reconnect.jsonl";
  job.faults = {fault(1, 3, "kill")};
  auto opts = cluster_options(3, 27490);
  opts.slowdowns = {5.0}; // slower steps, so the job outlives the restart
  actors::local_cluster cluster{opts};
  auto train = synthetic(job.batch_size * 50);
  auto log = std::string(ASTEROID_TEST_TMP) + "/ft-reconnect-node1.log";
  // Files of an earlier run must not be taken for this one's.
  std::remove(job.metrics_path.c_str());
  std::remove(log.c_str());
  std::atomic<bool> done{false};
  pid_t restarted = -1;
  std::thread restarter{[&] {
    // Once the loss is recovered from, start a new node process on the
    // killed node's endpoint; retry while the port cannot be bound yet (the
    // old connections may still hold it for a while).
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    bool recovered = false;
    while (!done && std::chrono::steady_clock::now() < deadline) {
      if (!recovered)
        recovered = slurp(job.metrics_path).find("\"fault\":\"recovered\"")
                    != std::string::npos;
      if (recovered) {
        auto pid = ::fork();
        if (pid == 0) { // only async-signal-safe calls: the parent has threads
          int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
          if (fd >= 0) {
            ::dup2(fd, 1);
            ::dup2(fd, 2);
          }
          ::execl(ASTEROID_CLI_PATH, ASTEROID_CLI_PATH, "node", "--listen",
                  "127.0.0.1:27491", "--name", "node1-again", "--threads", "1",
                  nullptr);
          std::_Exit(127);
        }
        // Listening, or exited (port busy)?
        for (int i = 0; i < 100; ++i) {
          if (slurp(log).find("listening on") != std::string::npos) {
            restarted = pid;
            return;
          }
          if (::waitpid(pid, nullptr, WNOHANG) == pid)
            break;
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        if (::waitpid(pid, nullptr, WNOHANG) == 0) { // neither: give up on it
          ::kill(pid, SIGKILL);
          ::waitpid(pid, nullptr, 0);
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
  }};
  actors::job_result r;
  try {
    r = run_on_cluster(job, cluster, train);
  } catch (...) {
    done = true;
    restarter.join();
    if (restarted > 0)
      ::kill(restarted, SIGKILL);
    throw;
  }
  done = true;
  restarter.join();
  if (restarted > 0) {
    ::kill(restarted, SIGTERM);
    ::waitpid(restarted, nullptr, 0);
  }
  REQUIRE(restarted > 0);
  CHECK(r.steps == job.max_steps);
  REQUIRE(find_event(r, "reconnected"));
  auto* back = find_event(r, "rejoined");
  REQUIRE(back);
  std::printf("[reconnect] new process admitted at step %lld\n",
              static_cast<long long>((*back)["step"].get<int64_t>()));
  CHECK(max_abs_diff(r.model, reference(job, *train)) < 1e-4);
}
