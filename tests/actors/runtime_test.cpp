#include "asteroid/actors/job.hpp"
#include "asteroid/actors/node.hpp"
#include "asteroid/actors/replica.hpp"
#include "asteroid/actors/stage_state.hpp"
#include "asteroid/data/make_dataset.hpp"
#include "asteroid/data/sampler.hpp"
#include "asteroid/planner/json_io.hpp"
#include "asteroid/planner/schedule.hpp"
#include "asteroid/serialization/checkpoint.hpp"
#include "asteroid/serialization/tensor_wire.hpp"
#include "asteroid/training/loss.hpp"
#include "asteroid/training/model_options_json.hpp"
#include "asteroid/training/optimizer.hpp"

#include "job_test_helpers.hpp"
#include "raw_socket.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <atomic>
#include <thread>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace asteroid;
using nlohmann::json;
using namespace asteroid::test;

namespace {

actors::job_result run_in_process(const actors::job_spec& job, int devices,
                                  std::shared_ptr<data::dataset> train) {
  in_process env{devices};
  return actors::run_job(*env.sys, job, env.devices,
                         fresh_model(job.model, job.seed), train, nullptr);
}

/// Waits up to `seconds` for child `pid` to exit; SIGKILLs it if it does
/// not. Returns whether it exited by itself, its wait status in `status`.
bool exits_within(pid_t pid, int seconds, int& status) {
  bool exited = false;
  for (int i = 0; i < 10 * seconds && !exited; ++i) {
    exited = ::waitpid(pid, &status, WNOHANG) == pid;
    if (!exited)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (!exited) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
  }
  return exited;
}

/// Whether a CAF handshake with 127.0.0.1:`port` succeeds within 500 ms.
/// Whether something accepts TCP connections on 127.0.0.1:`port` (a node
/// listens there; `asteroid cluster`'s nodes speak only TLS, so this does
/// not ask for its device actor).
bool listening(uint16_t port) {
  int fd = test::connect_loopback(port);
  if (fd >= 0)
    ::close(fd);
  return fd >= 0;
}

/// Whether nothing listens on `ports` any more, within 2 s.
bool all_closed(std::initializer_list<uint16_t> ports) {
  for (int i = 0; i < 20; ++i) {
    bool open = false;
    for (auto p : ports)
      open = open || listening(p);
    if (!open)
      return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

/// The mlp in 2 stages of batch 8 and 2 micro-batches: stage 0 (layer 0)
/// on devices 0 and 1 (3 + 1 rows), stage 1 on device 2.
actors::job_spec mlp_on_three_devices() {
  return base_job("mlp", make_plan(8, 2, {{0, 1, {0, 1}, {3, 1}}, {1, 3, {2}, {4}}}));
}

} // namespace

TEST_CASE("in-process HPP matches single-device training (mlp, unequal "
          "shares in both groups, 1F1B)") {
  auto train = synthetic(16 * 20);
  // mlp: fc1, fc2, classifier. Stage 0 on devices 0,1 (3+5), stage 1 on 2,3
  // (6+2): replica 0 of stage 1 gets rows from both stage-0 replicas.
  auto job = base_job("mlp", make_plan(16, 2, {{0, 2, {0, 1}, {3, 5}},
                                               {2, 3, {2, 3}, {6, 2}}}));
  auto r = run_in_process(job, 4, train);
  CHECK(r.steps == 20);
  auto diff = max_abs_diff(r.model, reference(job, *train));
  INFO("max abs diff " << diff);
  CHECK(diff < 1e-4);
  // Metrics: every link that carries rows is accounted for.
  const auto& links = r.iterations.back()["link_bytes"];
  for (auto key : {"s0r0->s1r0", "s0r1->s1r0", "s0r1->s1r1", "s1r0->s0r0",
                   "s1r0->s0r1", "s1r1->s0r1", "ar s0r0->s0r1"})
    CHECK(links.contains(key));
  CHECK_FALSE(links.contains("s0r0->s1r1")); // rows 0-2 all go to s1r0
}

TEST_CASE("a replay job with a checkpoint file leaves a checkpoint of its final "
          "state, optimizer included (issue 21, item 5)") {
  auto train = synthetic(16 * 7);
  auto job = base_job("mlp", make_plan(16, 2, {{0, 2, {0, 1}, {3, 5}},
                                               {2, 3, {2, 3}, {6, 2}}}));
  job.max_steps = 7;
  auto path = std::string{ASTEROID_TEST_TMP} + "/job-final-state.ckpt";
  std::filesystem::remove(path);
  job.fault_tolerance.recovery = "replay";
  job.fault_tolerance.checkpoint_path = path;
  job.fault_tolerance.checkpoint_every = 3;
  auto r = run_in_process(job, 4, train);
  REQUIRE(r.steps == 7);
  // After 7 steps, not the state before step 6 (the last periodic one).
  auto ck = serialization::load_checkpoint(path);
  CHECK(ck.step == 7);
  CHECK(ck.model_name == "mlp");
  auto model = fresh_model(job.model, job.seed);
  actors::load_stage_state(model, 0, static_cast<int>(model->size()), nullptr,
                           ck.model_state);
  CHECK(max_abs_diff(model, r.model) == 0);
  bool has_optimizer_state = false;
  for (auto& [name, t] : ck.model_state)
    has_optimizer_state |= name.rfind("o/", 0) == 0;
  CHECK(has_optimizer_state);
}

TEST_CASE("a job resumed from its checkpoint ends with the weights of a run "
          "never interrupted (issue 21, item 5)") {
  auto train = synthetic(16 * 8);
  auto job = base_job("mlp", make_plan(16, 2, {{0, 2, {0, 1}, {3, 5}},
                                               {2, 3, {2, 3}, {6, 2}}}));
  job.max_steps = 8;
  // base_job's SGD has momentum: state beyond the weights that must come back.
  job.fault_tolerance.recovery = "replay";
  job.fault_tolerance.checkpoint_every = 3;
  auto whole = run_in_process(job, 4, train);
  REQUIRE(whole.steps == 8);

  // The first 5 steps, as if the supervisor had died after them.
  auto path = std::string{ASTEROID_TEST_TMP} + "/job-resume.ckpt";
  std::filesystem::remove(path);
  auto first = job;
  first.max_steps = 5;
  first.fault_tolerance.checkpoint_path = path;
  REQUIRE(run_in_process(first, 4, train).steps == 5);
  REQUIRE(serialization::load_checkpoint(path).step == 5);

  auto rest = job;
  rest.fault_tolerance.checkpoint_path = path;
  rest.resume_from = path;
  rest.metrics_path = std::string{ASTEROID_TEST_TMP} + "/job-resume.jsonl";
  std::filesystem::remove(rest.metrics_path);
  auto resumed = run_in_process(rest, 4, train);
  CHECK(resumed.steps == 8);
  // It ran steps 5 to 7 only, from the checkpoint's state.
  auto starts = records_of(rest.metrics_path, "start");
  REQUIRE(starts.size() == 1);
  CHECK(starts[0]["first_step"] == 5);
  CHECK(records_of(rest.metrics_path, "iteration").size() == 3);
  std::filesystem::remove(rest.metrics_path);
  auto diff = max_abs_diff(resumed.model, whole.model);
  INFO("max |w_resumed - w_whole| " << diff);
  CHECK(diff < 1e-6);
  CHECK(serialization::load_checkpoint(path).step == 8);
  // A checkpoint that does not fit the job is refused before any node is
  // claimed, naming the file.
  auto error_of = [&](const actors::job_spec& j) {
    try {
      run_in_process(j, 4, train);
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  auto ck = serialization::load_checkpoint(path);
  ck.step = 9; // a valid checksum, a step this 8-step job cannot have reached
  auto beyond = std::string{ASTEROID_TEST_TMP} + "/job-resume-beyond.ckpt";
  serialization::save_checkpoint(beyond, ck);
  auto bad = rest;
  bad.fault_tolerance.checkpoint_path.clear();
  bad.resume_from = beyond;
  CHECK_THAT(error_of(bad), Catch::Contains("job-resume-beyond.ckpt")
                              && Catch::Contains("holds step 9, outside this "
                                                 "job's steps 0 to 8"));
  ck.step = 5;
  ck.model_name = "cnn";
  serialization::save_checkpoint(beyond, ck);
  CHECK_THAT(error_of(bad), Catch::Contains("holds model 'cnn', but the job "
                                            "trains 'mlp'"));
  std::filesystem::remove(beyond);
  std::filesystem::remove(path);
}

TEST_CASE("in-process HPP: GPipe, 3 stages, credit window 1") {
  auto train = synthetic(12 * 20);
  auto job = base_job("mlp", make_plan(12, 3, {{0, 1, {0}, {4}},
                                               {1, 2, {1, 2}, {1, 3}},
                                               {2, 3, {3}, {4}}}));
  job.schedule = "gpipe";
  job.credit_window = 1;
  auto r = run_in_process(job, 4, train);
  auto diff = max_abs_diff(r.model, reference(job, *train));
  INFO("max abs diff " << diff);
  CHECK(diff < 1e-4);
  for (auto& rep : r.iterations.back()["replicas"])
    CHECK(rep["max_unacked"].get<int>() <= 1);
}

TEST_CASE("in-process HPP trains with the loss the job names (a registered "
          "one), like single-device training with it") {
  // Label smoothing changes every gradient, so weights that match the
  // reference prove the replicas computed this loss, not cross-entropy.
  training::register_loss("test_label_smoothing",
                          [](const torch::Tensor& out, const torch::Tensor& y) {
                            namespace F = torch::nn::functional;
                            return F::cross_entropy(
                              out, y,
                              F::CrossEntropyFuncOptions()
                                .reduction(torch::kSum)
                                .label_smoothing(0.2));
                          });
  auto train = synthetic(12 * 20);
  auto job = base_job("mlp", make_plan(12, 2, {{0, 2, {0}, {6}},
                                               {2, 3, {1, 2}, {2, 4}}}));
  job.loss = "test_label_smoothing";
  auto r = run_in_process(job, 3, train);
  auto diff = max_abs_diff(r.model, reference(job, *train));
  INFO("max abs diff " << diff);
  CHECK(diff < 1e-4);
  auto plain = job;
  plain.loss = "cross_entropy";
  CHECK(max_abs_diff(r.model, reference(plain, *train)) > 1e-3);
}

TEST_CASE("a job naming an unknown loss is refused before anything runs") {
  json j = {{"model", "mlp"}, {"nodes", {"127.0.0.1:27001"}},
            {"planner", "asteroid"}, {"loss", "no_such_loss"}};
  REQUIRE_THROWS_WITH(actors::parse_job(j, "job.json"),
                      Catch::Contains("job.json: loss: unknown loss "
                                      "'no_such_loss' (known: cross_entropy"));
}

TEST_CASE("a plan that gives a device a zero share is refused before anything runs") {
  // A device either computes part of every micro-batch or is not in the
  // group: the planners never emit a zero share, and a hand-written plan
  // with one is refused, naming the stage and the device.
  auto train = synthetic(8 * 20);
  auto job = base_job("mlp", make_plan(8, 2, {{0, 1, {0, 1}, {4, 0}},
                                              {1, 3, {2}, {4}}}));
  REQUIRE_THROWS_WITH(run_in_process(job, 3, train),
                      Catch::Contains("stage 0: device 1") &&
                        Catch::Contains("has a zero share"));
}

TEST_CASE("in-process HPP: unequal shares, Adam") {
  auto train = synthetic(8 * 20);
  auto job = mlp_on_three_devices();
  job.optimizer.kind = training::optimizer_kind::adam;
  job.optimizer.lr = 1e-3;
  auto r = run_in_process(job, 3, train);
  auto diff = max_abs_diff(r.model, reference(job, *train));
  INFO("max abs diff " << diff);
  CHECK(diff < 1e-4);
}

TEST_CASE("micro-batch actors: every replica reports each pass of each "
          "micro-batch, and training is the same without them") {
  auto train = synthetic(8 * 12);
  auto job = mlp_on_three_devices();
  job.max_steps = 12;
  job.micro_batch_report_ms = 0; // at every wait (the default waits 20 ms)
  auto with = run_in_process(job, 3, train);
  job.micro_batch_actors = false;
  auto without = run_in_process(job, 3, train);
  REQUIRE(with.iterations.size() == 12);
  REQUIRE(without.iterations.size() == 12);
  for (size_t i = 0; i < with.iterations.size(); ++i) {
    INFO("step " << i);
    // 3 replicas x 2 micro-batches x (forward, backward), in at least one
    // message per replica and step and at most one per pass.
    CHECK(with.iterations[i]["micro_batch_actors"] == 2);
    CHECK(with.iterations[i]["micro_batch_reports"] == 12);
    CHECK(with.iterations[i]["micro_batch_messages"] >= 3);
    CHECK(with.iterations[i]["micro_batch_messages"] <= 12);
    CHECK(with.iterations[i]["micro_batch_relayed"] == 12);
    CHECK(without.iterations[i]["micro_batch_actors"] == 0);
    CHECK(without.iterations[i]["micro_batch_reports"] == 0);
    CHECK(without.iterations[i]["micro_batch_messages"] == 0);
    CHECK(without.iterations[i]["micro_batch_relayed"] == 0);
  }
  CHECK(max_abs_diff(with.model, without.model) == 0);
  CHECK(max_abs_diff(with.model, reference(job, *train)) < 1e-4);
}

TEST_CASE("a job's step reports carry compute spans only for the steps its trace "
          "records") {
  auto train = synthetic(8 * 4);
  auto job = mlp_on_three_devices();
  job.max_steps = 4;
  job.trace_steps = 2;
  const auto trace_path = std::string{ASTEROID_TEST_TMP} + "/report-spans-trace.json";
  std::filesystem::remove(trace_path);
  job.trace_path = trace_path;
  auto traced = run_in_process(job, 3, train);
  job.trace_path.clear();
  auto untraced = run_in_process(job, 3, train);
  REQUIRE(traced.iterations.size() == 4);
  REQUIRE(untraced.iterations.size() == 4);
  auto bytes = [](const actors::job_result& r, size_t i) {
    return r.iterations[i]["report_bytes"].get<int64_t>();
  };
  for (size_t i = 0; i < 4; ++i) {
    INFO("step " << i);
    CHECK(bytes(untraced, i) > 0);
    // Without spans a report is a few hundred bytes; with them (six to nine
    // per replica and step here) several times that.
    if (i < 2)
      CHECK(bytes(traced, i) > 2 * bytes(untraced, i));
    else if (i == 2)
      // At most the span of the snapshot each replica takes after the last
      // traced step, which goes with the next step's report.
      CHECK(bytes(traced, i) < bytes(untraced, i) + 3 * 400);
    else // the same fields; numbers may print a few digits longer
      CHECK(bytes(traced, i) < bytes(untraced, i) * 11 / 10);
  }
  std::ifstream in{trace_path};
  auto trace = json::parse(in);
  std::set<int64_t> steps;
  std::set<int64_t> tids;
  for (auto& ev : trace["traceEvents"])
    if (ev.value("cat", "") == "compute") {
      steps.insert(ev["args"]["step"].get<int64_t>());
      tids.insert(ev["tid"].get<int64_t>());
    }
  CHECK(steps == std::set<int64_t>{0, 1});
  CHECK(tids == std::set<int64_t>{0, 1, 100}); // every replica's spans
  CHECK(max_abs_diff(traced.model, untraced.model) == 0);
}

TEST_CASE("micro-batch actors with micro_batch_report_ms: a replica reports "
          "the passes of a step in one message when no wait lasts that long") {
  auto train = synthetic(8 * 6);
  auto job = mlp_on_three_devices();
  job.max_steps = 6;
  // No wait of an in-process step lasts a minute (the step would time out
  // first): each replica's passes go with its step's end.
  job.micro_batch_report_ms = 60000;
  auto r = run_in_process(job, 3, train);
  REQUIRE(r.iterations.size() == 6);
  for (const auto& rec : r.iterations) {
    INFO(rec["step"]);
    CHECK(rec["micro_batch_reports"] == 12);
    CHECK(rec["micro_batch_messages"] == 3);
    CHECK(rec["micro_batch_relayed"] == 12);
  }
  CHECK(max_abs_diff(r.model, reference(job, *train)) < 1e-4);
}

TEST_CASE("run-ahead: replicas start the next step before the supervisor "
          "has the reports, and training is the same as without") {
  auto train = synthetic(12 * 20);
  // A data-parallel group feeding a pipeline stage: stage 0's replicas finish
  // a step before stage 1 does and go on into the next.
  auto job = base_job("mlp", make_plan(12, 2, {{0, 2, {0, 1}, {2, 4}},
                                               {2, 3, {2}, {6}}}));
  auto count_ahead = [](const actors::job_result& r) {
    int n = 0;
    for (auto& it : r.iterations)
      n += it["started_ahead"].get<bool>() ? 1 : 0;
    return n;
  };
  auto ahead = run_in_process(job, 3, train);
  job.run_ahead = false;
  auto lockstep = run_in_process(job, 3, train);
  CHECK(ahead.steps == 20);
  CHECK(lockstep.steps == 20);
  // Every step but the first started ahead; none without run-ahead.
  CHECK(count_ahead(ahead) == 19);
  CHECK(count_ahead(lockstep) == 0);
  auto diff = max_abs_diff(ahead.model, reference(job, *train));
  INFO("max abs diff " << diff);
  CHECK(diff < 1e-4);
  CHECK(max_abs_diff(ahead.model, lockstep.model) < 1e-6);
  // A step's time runs from the end of the one before: they add up to the run.
  double sum = 0;
  for (auto& it : ahead.iterations)
    sum += it["seconds"].get<double>();
  CHECK(sum <= ahead.seconds);
  CHECK(sum >= 0.9 * ahead.seconds);
}

TEST_CASE("run-ahead holds back the start of a step that begins with a "
          "checkpoint") {
  auto train = synthetic(8 * 12);
  auto job = base_job("mlp", make_plan(8, 1, {{0, 3, {0}, {8}}}));
  job.max_steps = 12;
  job.fault_tolerance.recovery = "restart";
  job.fault_tolerance.checkpoint_every = 5;
  job.fault_tolerance.checkpoint_path =
    (std::filesystem::temp_directory_path() / ("asteroid-run-ahead-"
                                               + std::to_string(::getpid()) + ".ckpt"))
      .string();
  auto r = run_in_process(job, 1, train);
  std::filesystem::remove(job.fault_tolerance.checkpoint_path);
  REQUIRE(r.iterations.size() == 12);
  for (size_t i = 0; i < r.iterations.size(); ++i) {
    INFO("step " << i);
    // Steps 0, 5 and 10 start after a checkpoint; the first one after nothing.
    CHECK(r.iterations[i]["started_ahead"].get<bool>() == (i % 5 != 0));
  }
}

TEST_CASE("BatchNorm: statistics per micro-batch share (GPipe semantics)") {
  // cnn_bn: conv1 (BN), conv2 (BN), fc1, classifier. One replica per stage,
  // so each BatchNorm sees exactly one micro-batch: the run equals
  // single-device training with gradients accumulated over the micro-batches
  // (running statistics included), and differs from full-batch statistics.
  auto train = synthetic(8 * 20);
  auto job = base_job("cnn_bn", make_plan(8, 2, {{0, 2, {0}, {4}},
                                                 {2, 4, {1}, {4}}}));
  job.max_steps = 5;
  auto r = run_in_process(job, 2, train);
  auto per_micro = max_abs_diff(r.model, reference(job, *train, 2));
  auto full_batch = max_abs_diff(r.model, reference(job, *train, 1));
  INFO("per micro-batch " << per_micro << ", full batch " << full_batch);
  CHECK(per_micro < 1e-4);
  CHECK(full_batch > 1e-3);
}

TEST_CASE("a plan that does not fit the model fails naming the layer") {
  auto model = fresh_model("mlp", 1);
  auto too_long = make_plan(8, 1, {{0, 2, {0}, {8}}, {2, 5, {1}, {8}}});
  CHECK_THROWS_WITH(actors::check_plan_fits(too_long, model, "mlp", 2),
                    Catch::Contains("layer 3 does not exist")
                      && Catch::Contains("'classifier'"));
  auto gap = make_plan(8, 1, {{0, 1, {0}, {8}}, {2, 3, {1}, {8}}});
  CHECK_THROWS_WITH(actors::check_plan_fits(gap, model, "mlp", 2),
                    Catch::Contains("'fc2' (1)")
                      && Catch::Contains("no stage covers"));
  auto short_plan = make_plan(8, 1, {{0, 2, {0}, {8}}});
  CHECK_THROWS_WITH(actors::check_plan_fits(short_plan, model, "mlp", 1),
                    Catch::Contains("'classifier' (2)"));
  // And through a job: nothing is deployed.
  auto train = synthetic(64);
  auto job = base_job("mlp", too_long);
  CHECK_THROWS_WITH(run_in_process(job, 2, train),
                    Catch::Contains("'classifier'"));
}

TEST_CASE("an unreachable node fails fast, naming it") {
  actors::job_spec job = base_job("mlp", make_plan(8, 1, {{0, 3, {0}, {8}}}));
  job.nodes = {"127.0.0.1:27398"}; // nothing listens there
  job.dataset = "synthetic-images";
  job.connect_timeout_ms = 2000;
  auto t0 = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(actors::run_job(job), Catch::Contains("127.0.0.1:27398"));
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));
  CHECK_THROWS_WITH(actors::parse_endpoint("localhost"),
                    Catch::Contains("'localhost'"));
}

TEST_CASE("multi-process equivalence: mlp over 4 node processes") {
  actors::local_cluster cluster{cluster_options(4, 27310)};
  auto train = synthetic(16 * 20);
  auto job = base_job("mlp", make_plan(16, 2, {{0, 2, {0, 1}, {3, 5}},
                                               {2, 3, {2, 3}, {6, 2}}}));
  auto r = run_on_cluster(job, cluster, train);
  CHECK(r.steps == 20);
  auto diff = max_abs_diff(r.model, reference(job, *train));
  INFO("max abs diff " << diff);
  CHECK(diff < 1e-4);
  // Every link between two nodes took the data plane; the replica's own
  // node is reached by CAF.
  int tcp = 0;
  for (auto& rep : r.iterations.back()["replicas"]) {
    INFO(rep.dump());
    for (auto& [link, transport] : rep["channels"].items()) {
      INFO(link);
      CHECK(transport == (link == "home" ? "caf" : "tcp"));
      tcp += transport == "tcp";
    }
  }
  CHECK(tcp >= 4 * 3); // two neighbours and a ring successor each
  // The replicas' reports crossed from the node processes to the relay in
  // the supervisor's, every pass of every step: 4 replicas x 2 micro-batches
  // x (forward, backward).
  for (auto& it : r.iterations) {
    INFO(it["step"]);
    CHECK(it["micro_batch_reports"] == 16);
    CHECK(it["micro_batch_relayed"] == 16);
    CHECK(it["micro_batch_messages"] >= 4);
    CHECK(it["micro_batch_messages"] <= 16);
  }
  std::printf("[equivalence mlp 4 processes] max abs diff %.3g, %.1f "
              "samples/s, link bytes/iteration %s\n",
              diff, r.samples_per_s,
              r.iterations.back()["link_bytes"].dump().c_str());
}

TEST_CASE("multi-process equivalence: cnn over 3 node processes") {
  actors::local_cluster cluster{cluster_options(3, 27320)};
  auto train = synthetic(16 * 20);
  // cnn: conv1, conv2, fc1, classifier; stage 1 on two nodes, 5 + 3 rows.
  auto job = base_job("cnn", make_plan(16, 2, {{0, 2, {0}, {8}},
                                              {2, 4, {1, 2}, {5, 3}}}));
  job.optimizer.lr = 0.02;
  // Tensors in CAF messages between the processes (the data plane's job
  // above): every link's channel is CAF.
  job.data_plane = false;
  auto r = run_on_cluster(job, cluster, train);
  CHECK(r.steps == 20);
  auto diff = max_abs_diff(r.model, reference(job, *train));
  INFO("max abs diff " << diff);
  CHECK(diff < 1e-4);
  int links = 0;
  for (auto& rep : r.iterations.back()["replicas"])
    for (auto& [link, transport] : rep["channels"].items()) {
      INFO(rep["replica"] << " " << link);
      CHECK(transport == "caf");
      ++links;
    }
  CHECK(links >= 3 * 2);
  // Each replica built only its stage's layers: the tensors its model holds
  // are exactly those of its range (about a third and two thirds of the cnn,
  // whose fc1 dominates), not the whole model's.
  auto bytes_of = [&](int first, int end) {
    int64_t n = 0;
    for (auto& [name, t] : r.model->range_state(first, end))
      n += static_cast<int64_t>(t.nbytes());
    return n;
  };
  for (auto& rep : r.iterations.back()["replicas"]) {
    INFO(rep.dump());
    CHECK(rep["model_bytes"].get<int64_t>()
          == (rep["stage"] == 0 ? bytes_of(0, 2) : bytes_of(2, 4)));
  }
  CHECK(bytes_of(0, 2) < bytes_of(0, 4) / 10);
  std::printf("[equivalence cnn 3 processes, CAF only] max abs diff %.3g\n", diff);
}

TEST_CASE("a node logs malformed and unexpected messages and keeps serving") {
  actors::local_cluster cluster{cluster_options(1, 27330)};
  caf::actor_system_config cfg;
  actors::configure(cfg);
  caf::actor_system sys{cfg};
  auto dev = actors::connect(sys, "127.0.0.1", 27330,
                             std::chrono::milliseconds(3000));
  caf::scoped_actor self{sys};
  auto timeout = std::chrono::seconds(5);
  auto pong = [&] {
    bool ok = false;
    self->request(dev, timeout, caf::ping_atom::value)
      .receive([&](caf::pong_atom) { ok = true; }, [&](caf::error&) {});
    return ok;
  };
  REQUIRE(pong());
  // This test is the job that holds the node.
  const int64_t job_id = 7;
  self->request(dev, timeout, actors::claim_atom::value, job_id, int64_t{100}, int64_t{0})
    .receive([&](std::string& e, int64_t) { REQUIRE(e.empty()); },
             [&](caf::error& e) { FAIL(sys.render(e)); });
  // Malformed deploy: not JSON, JSON without fields, bad weights.
  auto deploy = [&](const std::string& spec, const std::string& weights) {
    std::string err = "no reply";
    self->request(dev, timeout, actors::deploy_atom::value, spec, weights)
      .receive([&](std::string& e, caf::actor&) { err = e; },
               [&](caf::error& e) { err = sys.render(e); });
    return err;
  };
  CHECK_THAT(deploy("{not json", ""), Catch::Contains("deploy on node0"));
  CHECK_THAT(deploy("{}", ""), Catch::Contains("replica spec"));
  auto spec = one_stage_mlp_spec(job_id);
  // A stream that would send to a stage that does not exist, or that never
  // steps, is refused on arrival: a replica runs only checked streams.
  spec.stream = {{planner::op::send_activation, 0, 1}};
  CHECK_THAT(deploy(actors::to_json(spec).dump(), ""),
             Catch::Contains("replica spec: schedule check: s0r0 instruction 0 "
                             "(SEND_ACT mb=0 to=s1)"));
  spec.stream = planner::find_schedule("1f1b").stream(0, 1, 1);
  spec.stream.pop_back();
  CHECK_THAT(deploy(actors::to_json(spec).dump(), ""),
             Catch::Contains("no STEP"));
  auto bad_op = actors::to_json(spec);
  bad_op["stream"][0]["op"] = "JUMP";
  CHECK_THAT(deploy(bad_op.dump(), ""),
             Catch::Contains("stream: [0].op: unknown instruction 'JUMP'"));
  spec.stream = planner::find_schedule("1f1b").stream(0, 1, 1);
  auto bad_trace = actors::to_json(spec);
  bad_trace["trace_steps"] = -2;
  CHECK_THAT(deploy(bad_trace.dump(), ""),
             Catch::Contains("trace_steps: must be -1 (every step) or a count of steps"));
  CHECK_THAT(deploy(actors::to_json(spec).dump(), "garbage"),
             Catch::Contains("deploy on node0"));
  CHECK(pong());
  // An unexpected message gets an error reply, not a crash.
  bool got_error = false;
  self->request(dev, timeout, std::string("hello"), 42)
    .receive([&](caf::message&) {}, [&](caf::error&) { got_error = true; });
  CHECK(got_error);
  CHECK(pong());
  // A valid replica survives garbage tensors and bad indices.
  auto model = fresh_model("mlp", 1);
  auto weights = serialization::encode_tensors(
    actors::capture_stage_state(model, 0, 3, nullptr));
  caf::actor replica;
  self->request(dev, timeout, actors::deploy_atom::value,
                actors::to_json(spec).dump(), weights)
    .receive([&](std::string& e, caf::actor& a) {
      CHECK(e.empty());
      replica = a;
    }, [&](caf::error&) {});
  REQUIRE(replica);
  auto garbage = [&](serialization::tensor_kind kind, int32_t mb,
                     int32_t sender, std::string payload) {
    serialization::tensor_message m;
    m.kind = kind;
    m.job = job_id;
    m.generation = spec.generation;
    m.micro_batch = mb;
    m.sender = sender;
    m.payload = std::move(payload);
    self->send(replica, actors::tensor_atom::value, std::move(m));
  };
  garbage(serialization::tensor_kind::activation, 0, 0, "not a tensor");
  garbage(serialization::tensor_kind::all_reduce, 0, 0, "ASTT garbage");
  garbage(serialization::tensor_kind::input, 99, -1, "");
  garbage(serialization::tensor_kind::gradient, 0, 7, "");
  garbage(static_cast<serialization::tensor_kind>(200), 0, 0, "");
  serialization::tensor_message foreign;
  foreign.kind = serialization::tensor_kind::activation;
  foreign.job = job_id + 1;
  self->send(replica, actors::tensor_atom::value, std::move(foreign));
  self->send(replica, actors::ack_atom::value, int64_t{spec.generation}, int32_t{5},
             int32_t{-1});
  self->send(replica, actors::peer_atom::value, int32_t{9}, int32_t{0},
             replica, std::string{});
  self->send(replica, actors::peer_atom::value, int32_t{9}, int32_t{0},
             replica); // the form before channels: matches no handler
  // Control messages from outside the job (here: without a sender, neither
  // the supervisor's process nor the node's) are refused: the replica keeps
  // running and answers the state read below.
  caf::anon_send(replica, actors::stop_atom::value);
  caf::anon_send(replica, actors::slow_atom::value, int32_t{5000});
  caf::anon_send(replica, actors::start_atom::value, int64_t{0}, caf::actor{});
  auto state = actors::read_replica_state(
    self.ptr(), caf::actor_cast<actors::replica_actor>(replica), timeout);
  int weight_entries = 0;
  for (auto& [name, t] : serialization::decode_tensors(state))
    weight_entries += name.rfind("w/", 0) == 0;
  CHECK(weight_entries == 6);
  CHECK(pong());
  auto log = slurp(cluster.log_path(0));
  CHECK_THAT(log, Catch::Contains("deploy failed"));
  CHECK_THAT(log, Catch::Contains("unexpected message"));
  CHECK_THAT(log, Catch::Contains("dropped"));
  CHECK_THAT(log, Catch::Contains("dropped activation of another job"));
  CHECK_THAT(log, Catch::Contains("refused a stop from an anonymous sender"));
  CHECK_THAT(log, Catch::Contains("refused a slowdown from an anonymous sender"));
  CHECK_THAT(log, Catch::Contains("refused a start from an anonymous sender"));
}

TEST_CASE("a node answers pings within milliseconds while its replicas "
          "compute (emulated slowdown 10)") {
  auto opts = cluster_options(2, 27340);
  opts.slowdowns = {10.0};
  actors::local_cluster cluster{opts};
  auto train = synthetic(16 * 4);
  auto job = base_job("cnn", make_plan(16, 2, {{0, 2, {0}, {8}},
                                               {2, 4, {1}, {8}}}));
  job.max_steps = 4;
  std::exception_ptr failure;
  std::atomic<bool> done{false};
  actors::job_result result;
  std::thread runner{[&] {
    try {
      result = run_on_cluster(job, cluster, train);
    } catch (...) {
      failure = std::current_exception();
    }
    done = true;
  }};
  caf::actor_system_config cfg;
  actors::configure(cfg);
  caf::actor_system sys{cfg};
  auto dev = actors::connect(sys, "127.0.0.1", 27340,
                             std::chrono::milliseconds(3000));
  caf::scoped_actor self{sys};
  std::vector<double> ping_ms;
  while (!done) {
    auto t0 = std::chrono::steady_clock::now();
    bool ok = false;
    self->request(dev, std::chrono::seconds(5), caf::ping_atom::value)
      .receive([&](caf::pong_atom) { ok = true; }, [&](caf::error&) {});
    CHECK(ok);
    ping_ms.push_back(std::chrono::duration<double, std::milli>(
                        std::chrono::steady_clock::now() - t0)
                        .count());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  runner.join();
  if (failure)
    std::rethrow_exception(failure);
  // Compute is padded 10x, so the pinged node's replica computes for a good
  // part of the run and many pings arrive while it does. That part is about
  // a third: 27-34 % in seven runs on a host with slower loopback
  // (2026-12-01), where a bound of 0.3 failed once in CI; 20x padding took it
  // only to 32-35 %.
  double busy = 0, wall = 0;
  for (auto& it : result.iterations) {
    wall += it["seconds"].get<double>();
    busy += it["replicas"][0]["busy_s"].get<double>();
  }
  std::sort(ping_ms.begin(), ping_ms.end());
  const auto pings = static_cast<int>(ping_ms.size());
  REQUIRE(pings >= 5);
  const double median = ping_ms[ping_ms.size() / 2];
  const double p90 = ping_ms[ping_ms.size() * 9 / 10];
  std::printf("[ping while computing] %d pings, median %.1f ms, 90th percentile %.1f ms, "
              "worst %.1f ms, replica busy %.0f%% of %.2f s\n",
              pings, median, p90, ping_ms.back(), 100 * busy / wall, wall);
  CHECK(busy > 0.2 * wall);
  // A node that computed on its own actor's thread would make most pings
  // wait out a step's compute (about 300 ms here). One slow answer is the
  // shared host's scheduling (one CI run saw 345 ms among 68 pings), so the
  // check is on the median and the 90th percentile, not on the worst.
  CHECK(median < 50);
  CHECK(p90 < 250);
}

TEST_CASE("compute_time profile: an emulated device computes each pass in its "
          "slowdown times the profile's time, however fast the host is, and in the "
          "profile's time when it holds a node of the same slowdown") {
  // mlp computes 8 rows in well under a millisecond here; its profile says
  // 10 ms per layer forward and 20 ms backward at any batch size.
  planner::model_profile prof;
  prof.model = "mlp";
  prof.device = "local";
  prof.input_bytes_per_sample = 784 * 4;
  for (const char* name : {"fc1", "fc2", "classifier"}) {
    planner::layer_profile l;
    l.name = name;
    l.batch_sizes = {1, 16};
    l.forward_s = {0.010, 0.010};
    l.backward_s = {0.020, 0.020};
    l.output_bytes_per_sample = 256 * 4;
    l.param_bytes = 1 << 20;
    l.optimizer_state_bytes = 1 << 20;
    prof.layers.push_back(l);
  }
  auto path = std::string(ASTEROID_TEST_TMP) + "/actors-flat-mlp-profile.json";
  planner::save_model_profile_file(prof, path);
  auto train = synthetic(16 * 4);
  auto job = base_job("mlp", make_plan(16, 2, {{0, 3, {0}, {8}}}));
  job.max_steps = 4;
  job.profile_path = path;
  in_process env{1, 2.0};
  auto busy_per_step = [&] {
    auto r = actors::run_job(*env.sys, job, env.devices, fresh_model("mlp", job.seed),
                             train, nullptr);
    CHECK(r.steps == 4);
    CHECK(max_abs_diff(r.model, reference(job, *train)) < 1e-4);
    std::vector<double> busy;
    for (auto& it : r.iterations)
      busy.push_back(it["replicas"][0]["busy_s"].get<double>());
    return busy;
  };
  job.compute_time = "profile";
  // Two micro-batches, each 3 x 10 ms forward and 3 x 20 ms backward, at
  // slowdown 2; the optimizer step is measured (and short).
  // The bounds leave room for late wake-ups on a loaded CI host (12 sleeps
  // a step) while still telling padding to the profile (0.36 s) from none
  // and from padding twice (0.72 s).
  for (double b : busy_per_step()) {
    CHECK(b >= 0.36 - 1e-6);
    CHECK(b < 0.36 + 0.2);
  }
  // A profile that holds the times of a node at slowdown 2 (profile_node
  // names it; here the file stands for what profiling there would give):
  // the device, at slowdown 2 itself, computes at exactly those times.
  job.profile_node = 0;
  for (double b : busy_per_step()) {
    CHECK(b >= 0.18 - 1e-6);
    CHECK(b < 0.18 + 0.15);
  }
  job.profile_node = -1;
  job.compute_time = "measured";
  for (double b : busy_per_step())
    CHECK(b < 0.2);
}

TEST_CASE("planner path: the Asteroid planner plans over the devices' "
          "reported capabilities, and the run still matches single-device") {
  // A hand-written profile of mlp (fc1 dominates), so the test does not
  // depend on timing this machine.
  planner::model_profile prof;
  prof.model = "mlp";
  prof.device = "local";
  prof.input_bytes_per_sample = 784 * 4;
  auto layer = [](std::string name, double f, int64_t out, int64_t params) {
    planner::layer_profile l;
    l.name = std::move(name);
    l.batch_sizes = {1, 32};
    l.forward_s = {f, 32 * f};
    l.backward_s = {2 * f, 64 * f};
    l.output_bytes_per_sample = out * 4;
    l.param_bytes = params * 4;
    l.optimizer_state_bytes = params * 4;
    l.working_bytes_per_sample = out * 8;
    return l;
  };
  prof.layers = {layer("fc1", 1e-3, 256, 784 * 256 + 256),
                 layer("fc2", 1e-4, 128, 256 * 128 + 128),
                 layer("classifier", 1e-5, 10, 1290)};
  auto path = std::string(ASTEROID_TEST_TMP) + "/actors-mlp-profile.json";
  planner::save_model_profile_file(prof, path);

  auto train = synthetic(32 * 10);
  actors::job_spec job = base_job("mlp", make_plan(32, 1, {{0, 3, {0}, {32}}}));
  job.plan.reset();
  job.planner = "asteroid";
  job.profile_path = path;
  job.max_steps = 10;
  in_process env{0};
  for (int i = 0; i < 4; ++i) {
    actors::device_options o;
    o.name = "dev" + std::to_string(i);
    o.slowdown = i < 2 ? 1.0 : 2.0;
    env.devices.push_back(actors::spawn_device(*env.sys, o));
  }
  auto r = actors::run_job(*env.sys, job, env.devices,
                           fresh_model("mlp", job.seed), train, nullptr);
  INFO(planner::format_schedule(r.plan, planner::schedule_kind::one_f_one_b));
  CHECK(r.plan.planner == "asteroid");
  CHECK(r.steps == 10);
  auto diff = max_abs_diff(r.model, reference(job, *train));
  INFO("max abs diff " << diff);
  CHECK(diff < 1e-4);
  // A profile of another model is refused, naming both.
  prof.layers.pop_back();
  planner::save_model_profile_file(prof, path);
  CHECK_THROWS_WITH(actors::run_job(*env.sys, job, env.devices,
                                    fresh_model("mlp", job.seed), train,
                                    nullptr),
                    Catch::Contains("has 2 layers"));
}

TEST_CASE("a node killed mid-job fails the job fast, naming the node") {
  auto opts = cluster_options(2, 27360);
  opts.slowdowns = {5.0};
  actors::local_cluster cluster{opts};
  auto train = synthetic(16 * 50);
  auto job = base_job("cnn", make_plan(16, 2, {{0, 2, {0}, {8}},
                                               {2, 4, {1}, {8}}}));
  job.max_steps = 50;
  job.fault_tolerance.recovery = "none"; // recovery: fault_tolerance_test.cpp
  std::thread killer{[&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    ::kill(cluster.pids()[1], SIGKILL);
  }};
  auto t0 = std::chrono::steady_clock::now();
  std::string what;
  try {
    run_on_cluster(job, cluster, train);
  } catch (const std::exception& e) {
    what = e.what();
  }
  killer.join();
  auto seconds = std::chrono::duration<double>(
                   std::chrono::steady_clock::now() - t0)
                   .count();
  INFO(what);
  CHECK_THAT(what, Catch::Contains("127.0.0.1:27361"));
  CHECK(seconds < 15);
}

TEST_CASE("asteroid cluster stops its nodes on SIGTERM, and they die with it "
          "on SIGKILL") {
  auto signal = GENERATE(SIGTERM, SIGKILL);
  INFO("signal " << signal);
  // Its own temporary folder: the cluster's credentials go there, and a
  // SIGKILLed program cannot remove them.
  const std::string tmp = std::string(ASTEROID_TEST_TMP) + "/actors-cluster-27370-tmp";
  std::filesystem::remove_all(tmp);
  std::filesystem::create_directories(tmp);
  auto pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    auto log = std::string(ASTEROID_TEST_TMP) + "/actors-cluster-27370.log";
    ::freopen(log.c_str(), "w", stdout);
    ::setenv("TMPDIR", tmp.c_str(), 1);
    ::execl(ASTEROID_CLI_PATH, ASTEROID_CLI_PATH, "cluster", "--nodes", "2",
            "--base-port", "27370", "--log-dir",
            ASTEROID_TEST_TMP "/actors-cluster-27370", nullptr);
    std::_Exit(127);
  }
  bool up = false;
  for (int i = 0; i < 100 && !up; ++i) {
    up = listening(27370) && listening(27371);
    if (!up)
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  CHECK(up);
  ::kill(pid, signal);
  int status = 0;
  CHECK(exits_within(pid, 10, status));
  // The nodes went with it: nothing listens on their ports any more. After
  // SIGKILL nobody stops them; the kernel's parent-death signal does.
  CHECK(all_closed({27370, 27371}));
  // Stopped by a signal it handles, it removed its credentials; SIGKILL
  // leaves them (without the CA's key: nobody can sign for that cluster).
  if (signal == SIGTERM)
    CHECK(std::filesystem::is_empty(tmp));
  std::filesystem::remove_all(tmp);
}

TEST_CASE("asteroid cluster --job: SIGINT or SIGTERM stops the job after its "
          "running step and exits 128 + the signal, and a second signal ends it "
          "at once, nodes included") {
  auto signal = GENERATE(SIGINT, SIGTERM);
  auto twice = GENERATE(false, true);
  INFO("signal " << signal << (twice ? ", twice" : ", once"));
  const std::string dir = std::string(ASTEROID_TEST_TMP) + "/actors-job-signal-27375-"
                          + std::to_string(signal) + (twice ? "-twice" : "-once");
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const auto metrics = dir + "/metrics.jsonl";
  // Far more steps than the test waits for.
  json job{{"model", "mlp"},           {"dataset", "synthetic-images"},
           {"synthetic_count", 512},   {"batch_size", 32},
           {"micro_batches", 2},       {"lr", 0.05},
           {"epochs", 100000},         {"max_steps", 100000},
           {"nodes", {"replaced:1", "replaced:2"}},
           {"plan", {{"planner", "hand"}, {"batch_size", 32}, {"micro_batches", 2},
                     {"stages", {{{"first_layer", 0}, {"end_layer", 2},
                                  {"devices", {0}}, {"shares", {16}}},
                                 {{"first_layer", 2}, {"end_layer", 3},
                                  {"devices", {1}}, {"shares", {16}}}}}}},
           // Evaluating: a stopped job must skip it (checked below).
           {"metrics", metrics},       {"evaluate", true},
           {"test_limit", 64},         {"progress", 0}};
  std::ofstream(dir + "/job.json") << job.dump();
  // The cluster's throw-away credentials and its log folder (no --log-dir)
  // go to a temp folder of this test's own, checked empty at the end.
  const std::string temp = dir + "/tmp";
  std::filesystem::create_directories(temp);
  std::vector<std::string> environment{"TMPDIR=" + temp};
  for (char** e = environ; *e != nullptr; ++e)
    if (std::string_view(*e).rfind("TMPDIR=", 0) != 0)
      environment.emplace_back(*e);
  std::vector<char*> envp;
  for (auto& e : environment)
    envp.push_back(e.data());
  envp.push_back(nullptr);
  const std::string out = dir + "/out.log", err = dir + "/err.log",
                    job_path = dir + "/job.json";
  auto pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::freopen(out.c_str(), "w", stdout);
    ::freopen(err.c_str(), "w", stderr);
    ::execle(ASTEROID_CLI_PATH, ASTEROID_CLI_PATH, "cluster", "--nodes", "2",
             "--base-port", "27375", "--job", job_path.c_str(), nullptr, envp.data());
    std::_Exit(127);
  }
  auto count = [&](const std::string& event) {
    std::istringstream lines{slurp(metrics)};
    int n = 0;
    for (std::string line; std::getline(lines, line);)
      n += line.find("\"event\":\"" + event + "\"") != std::string::npos;
    return n;
  };
  // Bounded wait for the job to be under way.
  for (int i = 0; i < 600 && count("iteration") < 3; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  REQUIRE(count("iteration") >= 3);
  ::kill(pid, signal);
  if (twice) {
    // Two signals sent back to back can merge into one pending signal: the
    // second goes once the first has been handled (its note on stderr).
    for (int i = 0; i < 100 && slurp(err).find("stopping the job") == std::string::npos; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    CHECK(slurp(err).find("stopping the job") != std::string::npos);
    ::kill(pid, signal);
  }
  int status = 0;
  // A stop waits for the running step and the nodes' exit (SIGKILL after 3 s).
  REQUIRE(exits_within(pid, 60, status));
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 128 + signal);
  if (!twice) {
    // Stopped at a step boundary: its weights gathered, its last record says so.
    REQUIRE(count("done") == 1);
    std::istringstream lines{slurp(metrics)};
    json done;
    for (std::string line; std::getline(lines, line);)
      if (line.find("\"event\":\"done\"") != std::string::npos)
        done = json::parse(line);
    CHECK(done["stopped"] == true);
    CHECK(done["steps"].get<int64_t>() >= 3);
    CHECK(done["steps"].get<int64_t>() < 100000);
    CHECK(slurp(dir + "/out.log").find(std::string("job stopped by ")
                                       + (signal == SIGINT ? "SIGINT" : "SIGTERM"))
          != std::string::npos);
    // A stopped job does not evaluate: it ends after its running step.
    CHECK(slurp(dir + "/out.log").find("test accuracy not evaluated") != std::string::npos);
  }
  // Either way the nodes are gone: nothing listens on their ports.
  CHECK(all_closed({27375, 27376}));
  // And nothing is left in the temp folder: the credentials and the logs
  // went with the cluster (the second signal's handler removes them).
  std::vector<std::string> left;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(temp))
    left.push_back(entry.path().string());
  INFO("left in " << temp << ": " << left.size());
  for (const auto& path : left)
    UNSCOPED_INFO(path);
  CHECK(left.empty());
}

TEST_CASE("asteroid job --resume: a job whose program is killed with SIGKILL "
          "goes on from its checkpoint to the uninterrupted run's weights") {
  auto opts = cluster_options(2, 27580);
  opts.slowdowns = {3.0}; // steps slow enough to be killed in the middle
  actors::local_cluster cluster{opts};
  const std::string dir = std::string(ASTEROID_TEST_TMP) + "/actors-resume-27580";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  auto job_file = [&](const std::string& name) {
    json job{{"model", "mlp"},           {"dataset", "synthetic-images"},
             {"synthetic_count", 512},   {"batch_size", 32},
             {"micro_batches", 2},       {"lr", 0.05},
             {"epochs", 100},            {"max_steps", 120},
             {"nodes", cluster.endpoints()},
             {"plan", {{"planner", "hand"}, {"batch_size", 32}, {"micro_batches", 2},
                       {"stages", {{{"first_layer", 0}, {"end_layer", 2},
                                    {"devices", {0}}, {"shares", {16}}},
                                   {{"first_layer", 2}, {"end_layer", 3},
                                    {"devices", {1}}, {"shares", {16}}}}}}},
             {"fault_tolerance", {{"checkpoint", dir + "/" + name + ".ckpt"},
                                  {"checkpoint_every", 10}}},
             {"metrics", dir + "/" + name + ".jsonl"},
             {"evaluate", false},        {"progress", 0}};
    auto path = dir + "/" + name + ".json";
    std::ofstream(path) << job.dump();
    return path;
  };
  auto start = [&](const std::string& config, const std::string& resume,
                   const std::string& log) {
    auto pid = ::fork();
    if (pid == 0) {
      ::freopen(log.c_str(), "w", stdout);
      ::freopen(log.c_str(), "a", stderr);
      if (resume.empty())
        ::execl(ASTEROID_CLI_PATH, ASTEROID_CLI_PATH, "job", "--config",
                config.c_str(), nullptr);
      else
        ::execl(ASTEROID_CLI_PATH, ASTEROID_CLI_PATH, "job", "--config",
                config.c_str(), "--resume", resume.c_str(), nullptr);
      std::_Exit(127);
    }
    return pid;
  };
  int status = 0;
  auto whole = start(job_file("whole"), "", dir + "/whole.log");
  REQUIRE(whole > 0);
  REQUIRE(exits_within(whole, 120, status));
  INFO(slurp(dir + "/whole.log"));
  REQUIRE((WIFEXITED(status) && WEXITSTATUS(status) == 0));

  auto config = job_file("killed");
  auto ckpt = dir + "/killed.ckpt";
  auto killed = start(config, "", dir + "/killed.log");
  REQUIRE(killed > 0);
  int64_t at = -1;
  for (int i = 0; i < 6000 && at < 20; ++i) { // 60 s at most
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    try {
      at = serialization::load_checkpoint(ckpt).step;
    } catch (const std::exception&) {
    }
  }
  ::kill(killed, SIGKILL);
  ::waitpid(killed, &status, 0);
  auto ck_at_kill = serialization::load_checkpoint(ckpt).step;
  INFO("checkpoint at the kill: step " << ck_at_kill);
  REQUIRE(ck_at_kill >= 20);
  REQUIRE(ck_at_kill < 120); // killed in the middle, not after the end

  auto resumed = start(config, ckpt, dir + "/resumed.log");
  REQUIRE(resumed > 0);
  CHECK(exits_within(resumed, 120, status));
  INFO(slurp(dir + "/resumed.log"));
  REQUIRE((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  // It went on from the checkpoint, not from the start.
  auto starts = records_of(dir + "/killed.jsonl", "start");
  REQUIRE_FALSE(starts.empty());
  CHECK(starts.back()["first_step"] == ck_at_kill);
  auto a = serialization::load_checkpoint(dir + "/whole.ckpt");
  auto b = serialization::load_checkpoint(ckpt);
  CHECK(a.step == 120);
  CHECK(b.step == 120);
  REQUIRE(a.model_state.size() == b.model_state.size());
  double diff = 0;
  for (size_t i = 0; i < a.model_state.size(); ++i) {
    REQUIRE(a.model_state[i].first == b.model_state[i].first);
    diff = std::max(diff, (a.model_state[i].second - b.model_state[i].second)
                            .abs()
                            .max()
                            .item<double>());
  }
  INFO("max |w_resumed - w_whole| " << diff);
  CHECK(diff < 1e-6); // same plan, same devices: the same sums in the same order
  std::filesystem::remove_all(dir);
}
