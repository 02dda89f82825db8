// Unit tests of the fault-tolerance pieces that need no processes:
// heartbeat bookkeeping, the node's snapshot store, stage states, and a
// node's device actor in this process answering heartbeats while it works.
#include "cut_paths.hpp"
#include "in_process.hpp"
#include "path_blame.hpp"
#include "snapshot_copies.hpp"
#include "unreachable_reports.hpp"

#include "asteroid/actors/heartbeat_monitor.hpp"
#include "asteroid/actors/job.hpp"
#include "asteroid/actors/link_switch.hpp"
#include "asteroid/actors/node.hpp"
#include "asteroid/actors/protocol.hpp"
#include "asteroid/actors/snapshot_store.hpp"
#include "asteroid/actors/stage_state.hpp"
#include "asteroid/serialization/tensor_wire.hpp"
#include "asteroid/training/model_registry.hpp"
#include "asteroid/training/optimizer.hpp"

#include <catch2/catch.hpp>

#include <functional>
#include <limits>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

using namespace asteroid;
using namespace std::chrono_literals;
using nlohmann::json;

TEST_CASE("heartbeat_monitor: silent longer than interval x misses means dead") {
  actors::heartbeat_monitor hb{3, 100ms, 4};
  auto t = actors::heartbeat_monitor::clock::time_point{} + 1h;
  hb.reset(t);
  CHECK(hb.tolerance() == 400ms);
  CHECK(hb.due(t));
  auto round = hb.pinged(t);
  CHECK_FALSE(hb.due(t + 50ms));
  hb.answered(0, round, t + 10ms);
  hb.answered(1, round, t + 10ms);
  // device 2 never answers
  CHECK(hb.newly_dead(t + 400ms).empty());
  hb.answered(0, round, t + 350ms);
  auto dead = hb.newly_dead(t + 401ms);
  CHECK(dead == std::vector<int>{2});
  CHECK(hb.newly_dead(t + 402ms).empty()); // reported once
  CHECK(hb.dead(2));
  CHECK(hb.newly_dead(t + 411ms) == std::vector<int>{1});
  CHECK(hb.newly_dead(t + 751ms) == std::vector<int>{0});
}

TEST_CASE("heartbeat_monitor: ignores answers it never asked for, catches up "
          "after a pause of its own") {
  actors::heartbeat_monitor hb{1, 100ms, 2};
  auto t = actors::heartbeat_monitor::clock::time_point{} + 1h;
  hb.reset(t);
  hb.pinged(t);
  hb.answered(0, 99, t + 150ms); // a round never sent
  hb.answered(7, 1, t + 150ms);  // no such device
  // The supervisor was busy for a second and sent no pings: not the device's
  // fault.
  hb.catch_up(t + 1s);
  CHECK(hb.newly_dead(t + 1s + 150ms).empty());
  // Its clock restarted, but it has not answered since it was pinged at t:
  // a report blaming a path to it waits for the heartbeats.
  CHECK(hb.last_seen(0) == t + 1s);
  CHECK(hb.last_answer(0) == actors::heartbeat_monitor::clock::time_point{});
  CHECK(hb.newly_dead(t + 1s + 201ms) == std::vector<int>{0});
  hb.revive(0, t + 2s);
  CHECK_FALSE(hb.dead(0));
  CHECK(hb.last_answer(0) == t + 2s);
  auto round = hb.pinged(t + 2s);
  hb.answered(0, round, t + 2s + 5ms);
  CHECK(hb.last_answer(0) == t + 2s + 5ms);
  CHECK_THROWS_WITH(actors::heartbeat_monitor(1, 0ms, 1),
                    Catch::Contains("interval"));
}

TEST_CASE("heartbeat_monitor: a device added mid-job is watched from then on") {
  actors::heartbeat_monitor hb{2, 100ms, 2};
  auto t = actors::heartbeat_monitor::clock::time_point{} + 1h;
  hb.reset(t);
  auto round = hb.pinged(t);
  hb.answered(0, round, t + 10ms);
  hb.answered(1, round, t + 10ms);
  CHECK(hb.add_device(t + 150ms) == 2);
  CHECK(hb.size() == 3);
  CHECK_FALSE(hb.dead(2));
  round = hb.pinged(t + 150ms);
  hb.answered(0, round, t + 160ms);
  hb.answered(1, round, t + 160ms);
  // Silent since it was added (t + 150 ms): dead after the tolerance.
  CHECK(hb.newly_dead(t + 340ms).empty());
  CHECK(hb.newly_dead(t + 351ms) == std::vector<int>{2});
}

namespace {

/// An mlp (seeded by `seed`) and its encoded stage state of layers [a, b).
struct mlp_states {
  explicit mlp_states(uint64_t seed) {
    torch::manual_seed(seed);
    model = training::build_model("mlp", json::object());
  }
  std::string operator()(int a, int b) const {
    return serialization::encode_tensors(actors::capture_stage_state(model, a, b, nullptr));
  }
  models::sequential_model model;
};

} // namespace

TEST_CASE("snapshot_store: keeps the newest versions, tiles ranges, rejects "
          "bad keys") {
  mlp_states state{1};
  auto& model = state.model;
  actors::snapshot_store store{2};
  CHECK(store.put("L0-1", 3, state(0, 1)).empty());
  CHECK(store.put("L1-3", 3, state(1, 3)).empty());
  CHECK(store.put("L0-1", 4, state(0, 1)).empty());
  CHECK(store.put("L0-1", 5, state(0, 1)).empty());
  CHECK_FALSE(store.get("L0-1", 3)); // only two versions kept
  CHECK(store.get("L0-1", 4));
  CHECK(store.inventory() == json{{"L0-1", {4, 5}}, {"L1-3", {3}}});
  CHECK_THAT(store.put("layers", 1, "x"), Catch::Contains("bad snapshot key"));
  CHECK_THAT(store.put("L3-1", 1, "x"), Catch::Contains("bad snapshot key"));
  CHECK_THAT(store.put("L0-1", -2, "x"), Catch::Contains("version"));
  // Tiling: [0, 3) at version 3 needs L0-1@3, which was dropped.
  CHECK(store.assemble(0, 3, 3).empty());
  CHECK(store.put("L0-1", 3, state(0, 1)).empty()); // older than both kept
  CHECK_FALSE(store.get("L0-1", 3));
  CHECK(store.assemble(1, 3, 3) == *store.get("L1-3", 3));
  actors::snapshot_store fresh;
  CHECK(fresh.put("L0-1", 3, state(0, 1)).empty());
  CHECK(fresh.put("L1-3", 3, state(1, 3)).empty());
  auto merged = fresh.assemble(0, 3, 3);
  REQUIRE_FALSE(merged.empty());
  auto other = training::build_model("mlp", json::object());
  actors::load_stage_state(other, 0, 3, nullptr,
                           serialization::decode_tensors(merged));
  for (auto& [name, t] : model->range_state(0, 3))
    for (auto& [n2, t2] : other->range_state(0, 3))
      if (name == n2)
        CHECK(torch::equal(t, t2));
  CHECK(fresh.assemble(0, 2, 3).empty()); // L1-3 does not fit inside [0, 2)
  // Dropping one version leaves the others; the last one takes its key.
  CHECK(fresh.put("L0-1", 4, state(0, 1)).empty());
  fresh.erase("L0-1", 3);
  fresh.erase("L0-1", 7); // not held: nothing happens
  CHECK(fresh.inventory() == json{{"L0-1", {4}}, {"L1-3", {3}}});
  fresh.erase("L0-1", 4);
  CHECK(fresh.inventory() == json{{"L1-3", {3}}});
  int a = 0, b = 0;
  CHECK(actors::snapshot_store::parse_key("L12-40", a, b));
  CHECK((a == 12 && b == 40));
  CHECK_FALSE(actors::snapshot_store::parse_key("L1-2x", a, b));
}

TEST_CASE("snapshot_store: a restore's parts share the held bytes, outlive a drop, and "
          "merge to what assemble gives") {
  // A device hands these to its builder, which merges them on its own
  // thread (device.cpp), while the store takes and drops snapshots.
  mlp_states state{2};
  actors::snapshot_store store{2};
  CHECK(store.put("L0-1", 3, state(0, 1)).empty());
  CHECK(store.put("L1-3", 3, state(1, 3)).empty());
  auto parts = store.parts(0, 3, 3);
  REQUIRE(parts.size() == 2);
  CHECK(*parts[0] == *store.get("L0-1", 3));
  CHECK(*parts[1] == *store.get("L1-3", 3));
  CHECK(parts == store.parts(0, 3, 3)); // the same bytes, not copies
  const auto merged = store.assemble(0, 3, 3);
  CHECK(actors::snapshot_store::merge(parts) == merged);
  CHECK(store.parts(0, 3, 4).empty()); // a version not held
  store.clear();
  CHECK(store.parts(0, 3, 3).empty());
  CHECK(actors::snapshot_store::merge(parts) == merged); // still held by the parts
  CHECK(actors::snapshot_store::merge({}).empty());
  auto one = actors::snapshot_store{};
  CHECK(one.put("L0-3", 1, merged).empty());
  REQUIRE(one.parts(0, 3, 1).size() == 1);
  CHECK(actors::snapshot_store::merge(one.parts(0, 3, 1)) == merged);
  CHECK(one.parts(0, 2, 1).empty()); // L0-3 does not fit inside [0, 2)
}

namespace {

using note_fn = std::function<void(std::string)>;

/// The answers of `dev` in the order they came to an actor of this process
/// (the job's, as far as the node can tell) that sends what `first` sends
/// (it notes its answer) and, right after it, a heartbeat ("heartbeat").
std::vector<std::string>
answer_order(caf::actor_system& sys, const actors::device_actor& dev,
             std::chrono::seconds timeout,
             std::function<void(caf::event_based_actor*, note_fn)> first) {
  caf::scoped_actor self{sys};
  sys.spawn(
    [=](caf::event_based_actor* r, caf::actor test) {
      auto order = std::make_shared<std::vector<std::string>>();
      note_fn noted = [=](std::string what) {
        order->push_back(std::move(what));
        if (order->size() == 2) {
          r->send(test, *order);
          r->quit();
        }
      };
      first(r, noted);
      r->request(dev, timeout, actors::heartbeat_atom::value, int64_t{1})
        .then([=](actors::heartbeat_atom, int64_t) { noted("heartbeat"); },
              [=](caf::error& e) { noted("heartbeat failed: " + r->system().render(e)); });
    },
    caf::actor_cast<caf::actor>(self));
  std::vector<std::string> order;
  self->receive([&](std::vector<std::string>& o) { order = o; },
                caf::after(timeout) >> [] { FAIL("no answers within the timeout"); });
  return order;
}

} // namespace

TEST_CASE("a node answers heartbeats while it merges a snapshot it is asked for, and "
          "its reads give the merged state, whole or in pieces") {
  // Merging held ranges decodes and encodes every tensor (about a second
  // for 100 MB on a small host); a device actor that did it itself answered
  // no heartbeat meanwhile and was counted lost by its supervisor.
  test::in_process env{1};
  auto dev = env.devices[0];
  caf::scoped_actor self{*env.sys};
  const auto timeout = 30s;
  const int64_t job = 5, version = 1;
  self->request(dev, timeout, actors::claim_atom::value, job, int64_t{10}, int64_t{0})
    .receive([&](std::string& e, int64_t) { REQUIRE(e.empty()); },
             [&](caf::error& e) { FAIL(env.sys->render(e)); });
  // Two neighbouring ranges of 32 MB each: their merge takes a while.
  std::string parts[2];
  for (int i = 0; i < 2; ++i) {
    parts[i] = serialization::encode_tensors(
      {{"w" + std::to_string(i), torch::rand({int64_t{8} << 20})}});
    serialization::tensor_message m;
    m.kind = serialization::tensor_kind::snapshot;
    m.job = job;
    m.key = "L" + std::to_string(i) + "-" + std::to_string(i + 1);
    m.step = version;
    m.sender = -1;
    m.payload = parts[i];
    self->send(dev, actors::tensor_atom::value, std::move(m));
  }
  actors::snapshot_store expected;
  REQUIRE(expected.put("L0-1", version, parts[0]).empty());
  REQUIRE(expected.put("L1-2", version, parts[1]).empty());
  const auto merged = expected.assemble(0, 2, version);
  std::string inventory;
  self->request(dev, timeout, actors::inventory_atom::value, int32_t{0})
    .receive([&](actors::inventory_atom, int32_t, std::string& text) { inventory = text; },
             [&](caf::error& e) { FAIL(env.sys->render(e)); });
  REQUIRE(json::parse(inventory) == json{{"L0-1", {version}}, {"L1-2", {version}}});
  auto order = answer_order(*env.sys, dev, timeout, [=](caf::event_based_actor* r,
                                                        note_fn noted) {
    r->request(dev, timeout, actors::fetch_atom::value, std::string{"L0-2"}, version)
      .then([=](std::string& e, std::string& bytes) {
              noted(e.empty() ? "read of " + std::to_string(bytes.size()) + " bytes"
                              : "read failed: " + e);
            },
            [=](caf::error& e) { noted("read failed: " + r->system().render(e)); });
  });
  CHECK(order == std::vector<std::string>{
                   "heartbeat", "read of " + std::to_string(merged.size()) + " bytes"});
  // The same read, whole and in pieces, gives the merge.
  self->request(dev, timeout, actors::fetch_atom::value, std::string{"L0-2"}, version)
    .receive([&](std::string& e, std::string& bytes) {
               CHECK(e.empty());
               CHECK(bytes == merged);
             },
             [&](caf::error& e) { FAIL(env.sys->render(e)); });
  auto in_pieces = [&](const std::string& key) {
    std::string out;
    for (int64_t total = -1; total < 0 || static_cast<int64_t>(out.size()) < total;)
      self->request(dev, timeout, actors::fetch_atom::value, key, version,
                    static_cast<int64_t>(out.size()))
        .receive(
          [&](std::string& e, std::string& piece, int64_t n) {
            REQUIRE(e.empty());
            REQUIRE_FALSE(piece.empty());
            out += piece;
            total = n;
          },
          [&](caf::error& e) { FAIL(env.sys->render(e)); });
    return out;
  };
  CHECK(in_pieces("L0-2") == merged);
  CHECK(in_pieces("L1-2") == parts[1]); // one held range: its own bytes
  // Neither held nor tiled: named.
  self->request(dev, timeout, actors::fetch_atom::value, std::string{"L0-3"}, version)
    .receive([&](std::string& e, std::string&) {
               CHECK_THAT(e, Catch::Contains("holds no snapshot L0-3 of version 1"));
             },
             [&](caf::error& e) { FAIL(env.sys->render(e)); });
}

TEST_CASE("a node answers heartbeats while it links to a peer that takes the connection "
          "and says nothing") {
  // Connecting waits for the peer's CAF handshake (up to 5 s): a device
  // actor that waited itself answered no heartbeat meanwhile.
  int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(listener >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0; // a free port, whichever
  socklen_t len = sizeof addr;
  REQUIRE(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(::listen(listener, 4) == 0); // the kernel takes connections; nobody speaks
  REQUIRE(::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  const auto port = ntohs(addr.sin_port);
  test::in_process env{1};
  auto dev = env.devices[0];
  const auto timeout = 30s;
  auto order = answer_order(*env.sys, dev, timeout, [=](caf::event_based_actor* r,
                                                        note_fn noted) {
    r->request(dev, timeout, actors::link_atom::value, std::string{"127.0.0.1"}, port)
      .then([=](std::string& e) { noted(e.empty() ? "linked" : "link failed"); },
            [=](caf::error& e) { noted("no answer to the link: " + r->system().render(e)); });
  });
  ::close(listener);
  CHECK(order == std::vector<std::string>{"heartbeat", "link failed"});
}

namespace {

/// SGD with momentum, so a step leaves optimizer state to capture.
training::optimizer_options sgd_with_momentum() {
  training::optimizer_options o;
  o.lr = 0.1;
  o.momentum = 0.9;
  return o;
}

} // namespace

TEST_CASE("stage state: optimizer state survives a merge of two ranges") {
  torch::manual_seed(2);
  auto model = training::build_model("mlp", json::object());
  auto o = sgd_with_momentum();
  auto L = static_cast<int>(model->size());
  // Two stages, each with its own optimizer, take one step.
  auto x = torch::randn({4, 1, 28, 28});
  auto p0 = model->range_parameters(0, 1), p1 = model->range_parameters(1, L);
  auto opt0 = training::make_optimizer(o, p0);
  auto opt1 = training::make_optimizer(o, p1);
  model->forward(x).sum().backward();
  opt0->step();
  opt1->step();
  auto s0 = actors::capture_stage_state(model, 0, 1, opt0.get());
  auto s1 = actors::capture_stage_state(model, 1, L, opt1.get());
  // One replica now runs all layers (a lost stage merged into its neighbour).
  auto merged = s0;
  merged.insert(merged.end(), s1.begin(), s1.end());
  auto copy = training::build_model("mlp", json::object());
  auto opt = training::make_optimizer(o, copy->range_parameters(0, L));
  actors::load_stage_state(copy, 0, L, opt.get(), merged);
  // Same next step on both sides: same weights.
  auto y = torch::randn({4, 1, 28, 28});
  for (auto* m : {&model, &copy})
    (*m)->zero_grad();
  model->forward(y).sum().backward();
  copy->forward(y).sum().backward();
  opt0->step();
  opt1->step();
  opt->step();
  auto a = model->range_state(0, L), b = copy->range_state(0, L);
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i)
    CHECK(torch::equal(a[i].second, b[i].second));
  // A range the state does not cover is named.
  auto part = actors::select_stage_state(model, 0, 1, s0);
  CHECK_FALSE(actors::covers(model, 0, L, part));
  CHECK_THROWS_WITH(actors::load_stage_state(copy, 0, L, opt.get(), part),
                    Catch::Contains("missing"));
}

TEST_CASE("stage state: a shared capture encodes the same bytes as a copy without "
          "copying the tensors, and a copy stays as it was when the model moves on") {
  torch::manual_seed(3);
  auto model = training::build_model("mlp", json::object());
  auto o = sgd_with_momentum();
  auto L = static_cast<int>(model->size());
  auto opt = training::make_optimizer(o, model->range_parameters(0, L));
  auto step = [&] {
    model->zero_grad();
    model->forward(torch::randn({4, 1, 28, 28})).sum().backward();
    opt->step();
  };
  step(); // the optimizer now has momentum buffers
  auto copied = actors::capture_stage_state(model, 0, L, opt.get());
  auto shared = actors::capture_stage_state(model, 0, L, opt.get(),
                                            serialization::tensor_capture::share);
  CHECK(serialization::encode_tensors(shared) == serialization::encode_tensors(copied));
  auto weights = model->range_state(0, L);
  REQUIRE(weights.size() > 0);
  const auto& first = weights.front().second;
  auto entry = [&](const serialization::named_tensors& s) {
    for (auto& [name, t] : s)
      if (name == "w/" + weights.front().first)
        return t;
    return torch::Tensor{};
  };
  REQUIRE(entry(shared).defined());
  CHECK(entry(shared).data_ptr() == first.data_ptr());
  CHECK(entry(copied).data_ptr() != first.data_ptr());
  int momentum_entries = 0;
  for (auto& [name, t] : shared)
    momentum_entries += name.rfind("o/", 0) == 0;
  CHECK(momentum_entries > 0);
  auto before = serialization::encode_tensors(copied);
  step();
  CHECK(serialization::encode_tensors(copied) == before);
  CHECK(serialization::encode_tensors(shared) != before); // it is the model
}

TEST_CASE("job file: every fault action is known, and an unknown one is "
          "named with the list") {
  json job{{"model", "mlp"},
           {"nodes", {"127.0.0.1:1", "127.0.0.1:2"}},
           {"planner", "asteroid"}};
  for (const char* action : {"kill", "stop", "cont", "cut", "heal"}) {
    job["faults"] = {{{"step", 2}, {"node", 1}, {"action", action}}};
    CHECK(actors::parse_job(job, "j.json").faults.at(0).action == action);
  }
  job["faults"] = {{{"step", 2}, {"node", 1}, {"action", "unplug"}}};
  CHECK_THROWS_WITH(actors::parse_job(job, "j.json"),
                    Catch::Contains("faults[0]")
                      && Catch::Contains("'unplug' is not one of kill, stop, "
                                         "cont, slow, cut, heal, reset, hog"));
  job["faults"] = {{{"step", 2}, {"node", 2}, {"action", "cut"}}};
  CHECK_THROWS_WITH(actors::parse_job(job, "j.json"),
                    Catch::Contains("node 2 is not in 'nodes' (2 nodes)"));
}

TEST_CASE("job file: a hog fault holds a memory size, and one without bytes "
          "or with a bad size is named") {
  json job{{"model", "mlp"},
           {"nodes", {"127.0.0.1:1", "127.0.0.1:2"}},
           {"planner", "asteroid"}};
  job["faults"] = {{{"step", 2}, {"node", 1}, {"action", "hog"}, {"bytes", "384MiB"}}};
  auto parsed = actors::parse_job(job, "j.json");
  CHECK(parsed.faults.at(0).bytes == int64_t{384} << 20);
  CHECK(parsed.fault_tolerance.memory_replan);
  job["faults"][0].erase("bytes");
  CHECK_THROWS_WITH(actors::parse_job(job, "j.json"),
                    Catch::Contains("faults[0].bytes") && Catch::Contains("bytes > 0"));
  job["faults"][0]["bytes"] = "lots";
  CHECK_THROWS_WITH(actors::parse_job(job, "j.json"),
                    Catch::Contains("faults[0].bytes") && Catch::Contains("lots"));
  job.erase("faults");
  job["fault_tolerance"] = {{"memory_replan", false}};
  CHECK_FALSE(actors::parse_job(job, "j.json").fault_tolerance.memory_replan);
  job["fault_tolerance"] = {{"memory_replan", 3}};
  CHECK_THROWS_WITH(actors::parse_job(job, "j.json"),
                    Catch::Contains("memory_replan"));
}

TEST_CASE("job file: a fault fires during a step by default, or during a "
          "recovery or the first deployment, and any other 'when' is named") {
  json job{{"model", "mlp"},
           {"nodes", {"127.0.0.1:1", "127.0.0.1:2"}},
           {"planner", "asteroid"}};
  job["faults"] = {{{"step", 2}, {"node", 1}}};
  CHECK(actors::parse_job(job, "j.json").faults.at(0).when == "step");
  job["faults"][0]["when"] = "recovery";
  CHECK(actors::parse_job(job, "j.json").faults.at(0).when == "recovery");
  job["faults"][0]["when"] = "start";
  CHECK(actors::parse_job(job, "j.json").faults.at(0).when == "start");
  job["faults"][0]["when"] = "later";
  CHECK_THROWS_WITH(actors::parse_job(job, "j.json"),
                    Catch::Contains("faults[0]")
                      && Catch::Contains("when 'later' is not one of step, "
                                         "recovery, start"));
}

TEST_CASE("job file: errors name the file and the field's path, as every "
          "JSON document's (one reader toolkit)") {
  json job{{"model", "mlp"},
           {"nodes", {"127.0.0.1:1", "127.0.0.1:2"}},
           {"planner", "asteroid"}};
  CHECK_NOTHROW(actors::parse_job(job, "j.json"));
  auto with = [&](const char* key, json value) {
    auto j = job;
    j[key] = std::move(value);
    return j;
  };
  CHECK_THROWS_WITH(actors::parse_job(with("lr", "fast"), "j.json"),
                    Catch::Contains("j.json: lr: expected a number, got string"));
  CHECK_THROWS_WITH(actors::parse_job(with("micro_batches", 1e12), "j.json"),
                    Catch::Contains("j.json: micro_batches: expected an integer"));
  CHECK_THROWS_WITH(actors::parse_job(with("micro_batches", int64_t{1} << 40), "j.json"),
                    Catch::Contains("j.json: micro_batches: integer out of range"));
  CHECK_THROWS_WITH(actors::parse_job(with("nodes", {"127.0.0.1:1", 7}), "j.json"),
                    Catch::Contains("j.json: nodes[1]: expected a string"));
  CHECK_THROWS_WITH(actors::parse_job(with("nodes", {"127.0.0.1:1", "nowhere"}), "j.json"),
                    Catch::Contains("j.json: nodes[1]: ") && Catch::Contains("nowhere"));
  CHECK_THROWS_WITH(actors::parse_job(with("memroy", 4), "j.json"),
                    Catch::Contains("j.json: memroy: unknown field (known: model,"));
  CHECK_THROWS_WITH(
    actors::parse_job(with("fault_tolerance", {{"heartbeat_ms", "often"}}), "j.json"),
    Catch::Contains("j.json: fault_tolerance.heartbeat_ms: expected an integer, got string"));
  CHECK_THROWS_WITH(actors::parse_job(json::array(), "j.json"),
                    Catch::Contains("j.json: expected an object, got array"));
  CHECK_FALSE(actors::parse_job(job, "j.json").full_duplex_links);
  CHECK(actors::parse_job(with("full_duplex_links", true), "j.json").full_duplex_links);
  CHECK_THROWS_WITH(actors::parse_job(with("full_duplex_links", "yes"), "j.json"),
                    Catch::Contains("j.json: full_duplex_links: "));
}

TEST_CASE("job file: every number is range-checked, and the error names the "
          "field and the range (issue 21, item 6)") {
  json job{{"model", "mlp"},
           {"nodes", {"127.0.0.1:1", "127.0.0.1:2"}},
           {"planner", "asteroid"}};
  auto with = [&](const char* key, json value) {
    auto j = job;
    j[key] = std::move(value);
    return j;
  };
  auto refused = [&](const char* key, json value, const std::string& says) {
    INFO(key << " = " << value.dump());
    CHECK_THROWS_WITH(actors::parse_job(with(key, value), "j.json"),
                      Catch::Contains(std::string("j.json: ") + key + ": ")
                        && Catch::Contains(says));
  };
  refused("momentum", 1.0, "must be in [0, 1)");
  refused("momentum", -0.1, "must be in [0, 1)");
  refused("lr", 0.0, "must be > 0");
  refused("lr", std::numeric_limits<double>::infinity(), "expected a finite number");
  refused("weight_decay", -1e-4, "must be >= 0");
  refused("lr", 1e300, "at most 3.4e38 (32-bit floats), got 1e+300");
  refused("weight_decay", 1e39, "at most 3.4e38 (32-bit floats), got 1e+39");
  refused("epochs", 0, "must be >= 1, got 0");
  refused("max_steps", -2, "-1 (every epoch) or a step count >= 0");
  refused("credit_window", -1, "must be >= 0");
  refused("train_limit", -5, "must be >= 0");
  refused("synthetic_count", 0, "must be >= 1");
  refused("step_timeout_ms", 0, "must be in [1, 604800000] ms, got 0");
  refused("connect_timeout_ms", -1, "must be in [1, 604800000] ms, got -1");
  // Beyond a week: a deadline that far would overflow the clock.
  refused("step_timeout_ms", int64_t{9'300'000'000'000}, "must be in [1, 604800000] ms");
  refused("micro_batch_report_ms", -1, "must be in [0, 604800000] ms, got -1");
  refused("compute_time", "profiled", "'profiled' (expected measured or profile)");
  CHECK_THROWS_WITH(
    actors::parse_job(with("fault_tolerance", {{"heartbeat_ms", int64_t{1} << 50}}), "j.json"),
    Catch::Contains("fault_tolerance.heartbeat_ms: must be in [1, 604800000]"));
  CHECK_THROWS_WITH(
    actors::parse_job(
      with("fault_tolerance", {{"heartbeat_ms", 1000000}, {"heartbeat_misses", 1000}}), "j.json"),
    Catch::Contains("fault_tolerance.heartbeat_misses: must be >= 1, and heartbeat_ms x "
                    "heartbeat_misses at most 604800000 ms"));
  CHECK_THROWS_WITH(
    actors::parse_job(with("faults", json::array({{{"node", 0}, {"action", "kill"},
                                                    {"delay_ms", int64_t{1} << 60}}})),
                      "j.json"),
    Catch::Contains("delay_ms in [0, 604800000]"));
  refused("model_options", json{{"num_clases", 3}},
          "unknown model option 'num_clases' (known: num_classes,");
  // Values too, not only keys: nothing reaches LibTorch to fail there
  // without the file and field in its message.
  refused("model_options", json{{"num_classes", -3}},
          "model option 'num_classes': must be >= 1, got -3");
  refused("model_options", json{{"num_classes", 2.7}},
          "model option 'num_classes': expected an integer, got 2.7");
  refused("model_options", json{{"num_classes", 1e300}},
          "model option 'num_classes': expected an integer");
  refused("model_options", json{{"dropout", 5}}, "model option 'dropout': must be below 1");
  refused("model_options", json{{"width_mult", 0}},
          "model option 'width_mult': must be in (0, 16], got 0");
  refused("model_options", json{{"hidden_sizes", {64, -1}}},
          "model option 'hidden_sizes': every width must be an integer in [1, 1e9], got -1");
  refused("model_options", json{{"patch_size", -2}},
          "model option 'patch_size': must be >= 0, got -2");
  CHECK_THROWS_WITH(
    actors::parse_job(with("fault_tolerance", {{"replan_threshold", std::numeric_limits<double>::infinity()}}), "j.json"),
    Catch::Contains("fault_tolerance.replan_threshold: expected a finite number"));
  CHECK_THROWS_WITH(
    actors::parse_job(with("faults", json::array({{{"node", 0}, {"action", "slow"},
                                                    {"slowdown", std::numeric_limits<double>::infinity()}}})),
                      "j.json"),
    Catch::Contains("faults[0].slowdown: expected a finite number"));
  // What the checks accept: the documented defaults and edges.
  CHECK_NOTHROW(actors::parse_job(with("max_steps", -1), "j.json"));
  CHECK_NOTHROW(actors::parse_job(with("momentum", 0.0), "j.json"));
  CHECK_NOTHROW(actors::parse_job(with("credit_window", 0), "j.json"));
  CHECK_NOTHROW(actors::parse_job(with("model_options", json{{"num_classes", 3}}), "j.json"));
  CHECK_NOTHROW(actors::parse_job(
    with("model_options", json{{"dropout", -1}, {"stochastic_depth", 0.5}, {"width_mult", 0.5},
                               {"hidden_sizes", {32}}, {"seed", -1}, {"image_size", 0}}),
    "j.json"));
}

TEST_CASE("a cluster refuses slowdowns that are not finite numbers >= 1, "
          "negative budgets and fewer than one thread, before starting a node") {
  actors::local_cluster::options o;
  o.nodes = 2;
  o.exe = "/nonexistent"; // never started: the checks come first
  auto refused = [&](actors::local_cluster::options bad, const std::string& says) {
    CHECK_THROWS_WITH(actors::local_cluster{bad}, Catch::Contains(says));
  };
  auto bad = o;
  bad.slowdowns = {1.0, std::numeric_limits<double>::quiet_NaN()};
  refused(bad, "--slowdown nan is not a finite number >= 1");
  bad.slowdowns = {std::numeric_limits<double>::infinity()};
  refused(bad, "is not a finite number >= 1");
  bad.slowdowns = {0.5};
  refused(bad, "is not a finite number >= 1");
  bad = o;
  bad.memory = {-1};
  refused(bad, "memory budget must not be negative");
  bad = o;
  bad.threads = 0;
  refused(bad, "--threads must be >= 1, got 0");
}

TEST_CASE("set_interface_up names the interface it could not change") {
  CHECK_THAT(actors::set_interface_up("asteroid-none0", false),
             Catch::Contains("'asteroid-none0' down"));
  CHECK_THAT(actors::set_interface_up("", true),
             Catch::Contains("not an interface name"));
  CHECK_THAT(actors::set_interface_up(std::string(40, 'x'), true),
             Catch::Contains("not an interface name"));
}

TEST_CASE("path_blame: a report of an unreachable peer loses the peer, unless "
          "the reporter lost a peer that way before, and counts for nothing "
          "about or from a device lost already") {
  actors::detail::path_blame blame;
  std::set<int> lost;
  CHECK(blame.blame(1, 1, lost) == -1);  // itself
  CHECK(blame.blame(-1, 2, lost) == -1); // not a member
  CHECK(blame.blame(1, 2, lost) == 2);   // the peer
  lost.insert(2);
  CHECK(blame.blame(2, 1, lost) == -1);  // the other side's report: out already
  CHECK(blame.blame(0, 2, lost) == -1);  // about a device lost already
  // Node 1 now reaches no one else either: its own network failed.
  CHECK(blame.blame(1, 3, lost) == 1);
  lost.insert(1);
  CHECK(blame.blame(1, 0, lost) == -1);
  // Another reporter's first report still loses its peer.
  CHECK(blame.blame(0, 3, lost) == 3);
}

TEST_CASE("unreachable_reports: a report about a peer silent to heartbeats "
          "waits for them, one about a peer that answers loses a device now") {
  actors::detail::unreachable_reports reports;
  std::set<int> lost;
  std::set<int> silent{3};
  auto answers = [&](int d) { return !silent.count(d); };
  auto name = [](int d) { return "n" + std::to_string(d); };
  reports.hold(0, 3, "timed out", lost);
  reports.hold(0, 3, "again", lost); // the same pair: held once
  reports.hold(1, 1, "itself", lost);
  reports.hold(-1, 2, "no member", lost);
  CHECK(reports.held() == 1);
  // Node 3 is silent as a whole: its heartbeats decide, not the path.
  CHECK_FALSE(reports.judge(lost, answers, name));
  CHECK(reports.held() == 1);
  // It answers again: the path between 0 and 3 failed; 3 goes.
  silent.clear();
  auto l = reports.judge(lost, answers, name);
  REQUIRE(l);
  CHECK(l->device == 3);
  CHECK(l->other == 0);
  CHECK(l->reason == "n0 cannot reach it over the data plane: timed out");
  CHECK(reports.held() == 0);
  lost.insert(3);
  // Two reports at once: one loss at a time, the second judged knowing it.
  reports.hold(0, 2, "a", lost);
  reports.hold(1, 2, "b", lost);
  l = reports.judge(lost, answers, name);
  REQUIRE(l);
  CHECK(l->device == 0); // 0 lost a peer that way before: its own network
  CHECK(l->other == 2);
  CHECK(reports.held() == 1);
  lost.insert(0);
  l = reports.judge(lost, answers, name);
  REQUIRE(l);
  CHECK(l->device == 2);
  CHECK(l->other == 1);
  lost.insert(2);
  // A report about a silent peer that the heartbeats then lose is dropped.
  silent.insert(1);
  reports.hold(4, 1, "c", lost);
  CHECK(reports.held() == 1);
  CHECK_FALSE(reports.judge(lost, answers, name));
  lost.insert(1);
  CHECK_FALSE(reports.judge(lost, answers, name));
  CHECK(reports.held() == 0);
}

TEST_CASE("plan_snapshot_copies: the fewest whole ranges that tile a need") {
  using actors::detail::plan_snapshot_copies;
  using actors::detail::snapshot_copy;
  using nlohmann::json;
  auto described = [](const std::vector<snapshot_copy>& copies) {
    std::vector<std::string> out;
    for (const auto& c : copies)
      out.push_back(std::to_string(c.holder) + ">" + std::to_string(c.target) + " "
                    + c.key);
    return out;
  };
  // Device 0 ran layers 0-1 and keeps stage 1's backup (1-3); device 1 ran
  // 0-1; device 2 (1-3) is lost. The merged stage 0-3 runs on 0 and 1.
  std::map<int, json> inv{{0, {{"L0-1", {4, 5}}, {"L1-3", {4, 5}}}},
                          {1, {{"L0-1", {4, 5}}}}};
  auto copies = plan_snapshot_copies({{0, 0, 3}, {1, 0, 3}}, inv, 5);
  CHECK(described(copies) == std::vector<std::string>{"0>1 L1-3"});
  // At a version nobody holds, or for a range nobody tiles: no copies.
  CHECK(plan_snapshot_copies({{1, 0, 3}}, inv, 6).empty());
  CHECK(plan_snapshot_copies({{1, 0, 2}}, inv, 5).empty());
  // Ranges the device holds cost nothing: 0-1 stays and 1-3 comes over
  // (2 layers cross a link), not a copy of 0-3 (3 layers); a device that
  // holds nothing gets 0-3 in one copy.
  inv[2] = {{"L0-3", {5}}};
  CHECK(described(plan_snapshot_copies({{1, 0, 3}}, inv, 5))
        == std::vector<std::string>{"0>1 L1-3"});
  inv[1] = json::object();
  CHECK(described(plan_snapshot_copies({{1, 0, 3}}, inv, 5))
        == std::vector<std::string>{"2>1 L0-3"});
  // A greedy longest first range (0-2) would strand the tiling at 2.
  std::map<int, json> gaps{{0, {{"L0-2", {1}}, {"L0-1", {1}}}}, {1, {{"L1-4", {1}}}},
                           {2, json::object()}};
  CHECK(described(plan_snapshot_copies({{2, 0, 4}}, gaps, 1))
        == std::vector<std::string>{"1>2 L1-4", "0>2 L0-1"});
  // The same range for two targets comes from two holders when it can.
  std::map<int, json> two{{0, {{"L0-2", {3}}}}, {1, {{"L0-2", {3}}}},
                          {2, json::object()}, {3, json::object()}};
  CHECK(described(plan_snapshot_copies({{2, 0, 2}, {3, 0, 2}}, two, 3))
        == std::vector<std::string>{"0>2 L0-2", "1>3 L0-2"});
  // Versions that are not integers and keys that do not parse are ignored.
  std::map<int, json> odd{{0, {{"L0-2", {"3"}}, {"x", {3}}}}, {1, json::object()}};
  CHECK(plan_snapshot_copies({{1, 0, 2}}, odd, 3).empty());
}

TEST_CASE("cut_paths: probed after a wait that doubles while the path fails") {
  using namespace std::chrono_literals;
  actors::detail::cut_paths paths{1000ms, 3000ms};
  auto t = actors::detail::cut_paths::clock::time_point{} + 1h;
  std::set<int> lost{2};
  paths.add(2, 0, t);
  CHECK(paths.due(t + 999ms, lost).empty());
  auto due = paths.due(t + 1000ms, lost);
  REQUIRE(due.size() == 1);
  CHECK(due[0].device == 2);
  CHECK(due[0].other == 0);
  CHECK(paths.due(t + 5000ms, lost).empty()); // under way: not twice
  // Failed: next after 2 s, then 3 s (the longest wait), 3 s again.
  CHECK(paths.ended(2, false, t + 1500ms) == -1);
  CHECK(paths.due(t + 3499ms, lost).empty());
  REQUIRE(paths.due(t + 3500ms, lost).size() == 1);
  CHECK(paths.ended(2, false, t + 4000ms) == -1);
  CHECK(paths.due(t + 6999ms, lost).empty());
  REQUIRE(paths.due(t + 7000ms, lost).size() == 1);
  CHECK(paths.ended(2, false, t + 7000ms) == -1);
  CHECK(paths.due(t + 9999ms, lost).empty());
  // Nobody probes from a node lost meanwhile.
  lost.insert(0);
  CHECK(paths.due(t + 20s, lost).empty());
  lost.erase(0);
  REQUIRE(paths.due(t + 20s, lost).size() == 1);
  // Answered: forgotten, and the probing end named.
  CHECK(paths.ended(2, true, t + 21s) == 0);
  CHECK_FALSE(paths.contains(2));
  CHECK(paths.ended(2, true, t + 22s) == -1);
  // Forgotten (removed by the program): never probed again.
  paths.add(3, 1, t);
  paths.forget(3);
  CHECK(paths.due(t + 1h, lost).empty());
}
