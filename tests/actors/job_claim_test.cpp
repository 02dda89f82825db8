// A node serves one job at a time: a node process on loopback, a "job" (an
// actor system that claims it) and a stranger (another actor system, as
// another program on the network would be) that tries to use it meanwhile;
// and what the node's snapshot store keeps once the job halted a deployment.
// Ports 27385-27387.
#include "job_test_helpers.hpp"

#include "asteroid/actors/protocol.hpp"
#include "asteroid/planner/schedule.hpp"
#include "asteroid/serialization/tensor_wire.hpp"

#include <thread>

using namespace asteroid;
using namespace asteroid::test;
using namespace std::chrono_literals;

namespace {

constexpr auto timeout = 5s;

/// One program on the network: its own actor system (its own CAF node)
/// connected to the node at `port`.
struct program {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  std::unique_ptr<caf::scoped_actor> self;
  actors::device_actor node;
  explicit program(uint16_t port) {
    actors::configure(cfg);
    sys = std::make_unique<caf::actor_system>(cfg);
    self = std::make_unique<caf::scoped_actor>(*sys);
    node = actors::connect_device(*sys, "127.0.0.1", port, 3s);
  }
  /// Error ("" when served) and the bytes of earlier snapshots dropped.
  std::pair<std::string, int64_t> claim(int64_t job, int64_t last_step) {
    std::pair<std::string, int64_t> out{"no reply", 0};
    (*self)->request(node, timeout, actors::claim_atom::value, job, last_step, int64_t{0})
      .receive([&](std::string& e, int64_t bytes) { out = {e, bytes}; },
               [&](caf::error& e) { out.first = sys->render(e); });
    return out;
  }
  /// The node's snapshot inventory as JSON text, or the error.
  std::string inventory() {
    std::string out = "no reply";
    (*self)->request(node, timeout, actors::inventory_atom::value, int32_t{0})
      .receive([&](actors::inventory_atom, int32_t, std::string& text) { out = text; },
               [&](caf::error& e) { out = "error: " + sys->render(e); });
    return out;
  }
  /// Error of a snapshot read ("" when the bytes came).
  std::string fetch(const std::string& key, int64_t version) {
    std::string out = "no reply";
    (*self)->request(node, timeout, actors::fetch_atom::value, key, version)
      .receive([&](std::string& e, std::string&) { out = e; },
               [&](caf::error& e) { out = sys->render(e); });
    return out;
  }
  /// The same read in pieces (`ast_fetch` with offsets): error, the bytes.
  std::pair<std::string, std::string> fetch_in_pieces(const std::string& key,
                                                      int64_t version) {
    std::pair<std::string, std::string> out;
    for (int64_t total = -1;
         out.first.empty() && (total < 0 || static_cast<int64_t>(out.second.size()) < total);)
      (*self)->request(node, timeout, actors::fetch_atom::value, key, version,
                       static_cast<int64_t>(out.second.size()))
        .receive(
          [&](std::string& e, std::string& piece, int64_t n) {
            out.first = e;
            out.second += piece;
            total = n;
            if (e.empty() && piece.empty())
              out.first = "an empty piece";
          },
          [&](caf::error& e) { out.first = sys->render(e); });
    return out;
  }
  /// Error of a request to copy a snapshot to another node's data plane.
  std::string copy(const std::string& key, int64_t version, const std::string& endpoint) {
    std::string out = "no reply";
    (*self)->request(node, timeout, actors::copy_atom::value, key, version, endpoint,
                     uint64_t{1})
      .receive([&](std::string& e) { out = e; },
               [&](caf::error& e) { out = sys->render(e); });
    return out;
  }
  /// Error of a state upload's piece.
  std::string upload(int64_t id, int64_t total, int64_t offset, const std::string& piece) {
    std::string out = "no reply";
    (*self)->request(node, timeout, actors::upload_atom::value, id, total, offset, piece)
      .receive([&](std::string& e) { out = e; },
               [&](caf::error& e) { out = sys->render(e); });
    return out;
  }
  /// A snapshot as the supervisor sends one (`sender` -1) or as replica
  /// `sender` of deployment `generation` does.
  void snapshot(int64_t job, const std::string& key, int64_t version,
                int64_t generation = 0, int32_t sender = -1) {
    serialization::tensor_message m;
    m.kind = serialization::tensor_kind::snapshot;
    m.job = job;
    m.key = key;
    m.step = version;
    m.generation = generation;
    m.sender = sender;
    m.payload = serialization::encode_tensors({{"w", torch::ones({4})}});
    (*self)->send(node, actors::tensor_atom::value, std::move(m));
  }
  std::string deploy() {
    std::string out = "no reply";
    (*self)->request(node, timeout, actors::deploy_atom::value, std::string("{}"),
                     std::string{})
      .receive([&](std::string& e, caf::actor&) { out = e; },
               [&](caf::error& e) { out = sys->render(e); });
    return out;
  }
  /// Error of deploying the 3-layer mlp of job `job` as a one-stage
  /// pipeline restored from the node's own snapshots of `version`.
  std::string deploy_restoring(int64_t job, int64_t version) {
    auto spec = one_stage_mlp_spec(job);
    spec.stream = planner::find_schedule("1f1b").stream(0, 1, 1);
    auto j = actors::to_json(spec);
    j["restore_version"] = version;
    std::string out = "no reply";
    (*self)->request(node, timeout, actors::deploy_atom::value, j.dump(), std::string{})
      .receive([&](std::string& e, caf::actor&) { out = e; },
               [&](caf::error& e) { out = sys->render(e); });
    return out;
  }
  /// Error of a profile request and of a link probe.
  std::pair<std::string, std::string> profile_and_probe() {
    std::pair<std::string, std::string> out{"no reply", "no reply"};
    (*self)->request(node, timeout, actors::profile_atom::value, std::string("{}"))
      .receive([&](std::string& e, std::string&) { out.first = e; },
               [&](caf::error& e) { out.first = sys->render(e); });
    (*self)->request(node, timeout, actors::probe_atom::value,
                     std::string("127.0.0.1:1"), int64_t{1024}, int32_t{1},
                     int32_t{actors::probe_caf}, int32_t{0})
      .receive([&](std::string& e, int64_t, int64_t) { out.second = e; },
               [&](caf::error& e) { out.second = sys->render(e); });
    return out;
  }
  double slowdown() {
    double out = -1;
    (*self)->request(node, timeout, actors::caps_atom::value)
      .receive([&](std::string& text) { out = json::parse(text).value("slowdown", -1.0); },
               [&](caf::error&) {});
    return out;
  }
};

} // namespace

TEST_CASE("a node serves one job: a stranger's claim, control messages and "
          "snapshots are refused and the job's snapshots stay") {
  actors::local_cluster cluster{cluster_options(1, 27385)};
  auto job = std::make_unique<program>(27385);
  program stranger{27385};

  REQUIRE(job->claim(111, 10).first.empty());
  job->snapshot(111, "L0-1", 3);
  REQUIRE(job->inventory() == R"({"L0-1":[3]})");

  auto [busy, dropped] = stranger.claim(222, 10);
  CHECK_THAT(busy, Catch::Contains("node0 refused job 222: busy with another "
                                   "job (job 111)"));
  CHECK(dropped == 0);
  CHECK_THAT(stranger.inventory(), Catch::Contains("node0 refused an inventory"));
  CHECK_THAT(stranger.fetch("L0-1", 3),
             Catch::Contains("node0 refused a snapshot read: a message from "
                             "process"));
  CHECK_THAT(stranger.fetch_in_pieces("L0-1", 3).first,
             Catch::Contains("node0 refused a snapshot read: a message from "
                             "process"));
  CHECK_THAT(stranger.copy("L0-1", 3, "127.0.0.1:9"),
             Catch::Contains("node0 refused a snapshot copy: a message from process"));
  // The job's own: a snapshot it does not hold, or one to an endpoint that
  // does not parse, is named, not sent.
  CHECK_THAT(job->copy("L0-2", 3, "127.0.0.1:9"),
             Catch::Contains("node0 holds no snapshot L0-2 of version 3"));
  CHECK_THAT(job->copy("L0-1", 3, "no port"),
             Catch::Contains("node0 could not copy snapshot L0-1"));
  CHECK_THAT(stranger.upload(1, 10, 0, "x"),
             Catch::Contains("node0 refused a state upload: a message from process"));
  CHECK_THAT(stranger.deploy(), Catch::Contains("node0 refused a deployment: a "
                                                 "message from process"));
  // The job's own: read in pieces as whole, and uploads bounded by the
  // node's memory budget.
  auto [read_error, read] = job->fetch_in_pieces("L0-1", 3);
  CHECK(read_error.empty());
  auto tensors = serialization::decode_tensors(read);
  REQUIRE(tensors.size() == 1);
  CHECK(torch::equal(tensors[0].second, torch::ones({4})));
  CHECK_THAT(job->upload(1, int64_t{1} << 40, 0, "x"),
             Catch::Contains("node0 refused a stage state of 1024.00 GiB: more than its "
                             "memory budget of"));
  CHECK(job->upload(2, 2, 0, "x").empty());
  CHECK_THAT(job->upload(2, 2, 5, "y"), Catch::Contains("where 1 bytes have arrived"));
  auto [profile, probe] = stranger.profile_and_probe();
  CHECK_THAT(profile, Catch::Contains("node0 refused a profile request: a message "
                                      "from process"));
  CHECK_THAT(probe, Catch::Contains("node0 refused a link probe: a message from "
                                    "process"));
  (*stranger.self)->send(stranger.node, actors::slow_atom::value, int32_t{11000});
  (*stranger.self)->send(stranger.node, actors::release_atom::value, int64_t{111});
  // Snapshots of another job, of no job, or of versions beyond the job's
  // last step (10) would push the job's own out of the store.
  stranger.snapshot(222, "L0-1", 4);
  stranger.snapshot(0, "L0-1", 5);
  job->snapshot(111, "L0-1", 11);
  job->snapshot(111, "L0-1", int64_t{1} << 62);
  job->snapshot(111, "L0-1", -1);
  // Messages from one sender arrive in order: once this answers, the
  // stranger's slowdown and release have been handled (and refused).
  CHECK(stranger.slowdown() == 1.0);
  CHECK(stranger.claim(222, 10).first.find("busy") != std::string::npos);
  CHECK(job->inventory() == R"({"L0-1":[3]})");
  CHECK(job->fetch("L0-1", 3).empty());

  // The job's process goes: the node is free again, and the next job's claim
  // drops the snapshots the last one left.
  job.reset();
  std::pair<std::string, int64_t> next{"never tried", 0};
  for (int i = 0; i < 50; ++i) {
    next = stranger.claim(222, 10);
    if (next.first.empty())
      break;
    std::this_thread::sleep_for(100ms);
  }
  REQUIRE(next.first.empty());
  CHECK(next.second > 0);
  CHECK(stranger.inventory() == "{}");
  // Its own release frees it at once (handled before the caps request that
  // follows it on the same connection).
  (*stranger.self)->send(stranger.node, actors::release_atom::value, int64_t{222});
  CHECK(stranger.slowdown() == 1.0);
  program third{27385};
  CHECK(third.claim(333, 1).first.empty());
}

TEST_CASE("a job on a node that serves another job fails naming the node, and "
          "the other job's snapshots stay") {
  actors::local_cluster cluster{cluster_options(1, 27386)};
  program first{27386};
  REQUIRE(first.claim(111, 10).first.empty());
  first.snapshot(111, "L0-2", 0);
  REQUIRE(first.inventory() == R"({"L0-2":[0]})");
  auto train = synthetic(16 * 4);
  auto second = base_job("mlp", make_plan(16, 1, {{0, 3, {0}, {16}}}));
  second.max_steps = 2;
  CHECK_THROWS_WITH(run_on_cluster(second, cluster, train),
                    Catch::Contains("node 127.0.0.1:27386 cannot serve this "
                                    "job: node0 refused job")
                      && Catch::Contains("busy with another job (job 111)"));
  CHECK(first.inventory() == R"({"L0-2":[0]})");
}

TEST_CASE("after a halt, a replaced generation's snapshots do not push the versions "
          "a recovery restores from out of the node's store") {
  // As a recovery meets it: the supervisor reads the inventory after halting
  // the old generation, then deploys a stage restored from a version listed
  // there. A replica of the old generation that still runs (on a node
  // counted lost but not gone) snapshots the next version meanwhile; the
  // store keeps two versions per range, so kept, it would evict the oldest.
  actors::local_cluster cluster{cluster_options(1, 27387)};
  program job{27387};
  REQUIRE(job.claim(111, 10).first.empty());
  job.snapshot(111, "L0-3", 0, 0, 0);
  job.snapshot(111, "L0-3", 1, 0, 0);
  REQUIRE(job.inventory() == R"({"L0-3":[0,1]})");
  (*job.self)->send(job.node, actors::halt_atom::value, int64_t{1});
  job.snapshot(111, "L0-3", 2, 0, 0);
  CHECK(job.inventory() == R"({"L0-3":[0,1]})");
  CHECK(job.fetch("L0-3", 0).empty());
  // What the supervisor sends (sender -1) and the new generation's replicas
  // snapshot are kept.
  job.snapshot(111, "L2-3", 1, 0, -1);
  job.snapshot(111, "L0-3", 2, 1, 0);
  CHECK(job.inventory() == R"({"L0-3":[1,2],"L2-3":[1]})");
  // A restore from a version the node does not hold is named as such.
  CHECK_THAT(job.deploy_restoring(111, 0),
             Catch::Contains("node0 holds no snapshot L0-3 of version 0 to restore from"));
}
