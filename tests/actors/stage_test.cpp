// Stage actors (issue #20, item 5): the deployment they are given, and the
// actor itself against stand-in device actors and replicas (no processes).
#include "asteroid/actors/stage.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <thread>

using namespace asteroid;
using nlohmann::json;
using std::chrono::milliseconds;

namespace {

/// What the stand-ins saw, in order: "<replica> <message>".
struct journal {
  std::mutex m;
  std::vector<std::string> lines;
  void add(const std::string& s) {
    std::lock_guard<std::mutex> g{m};
    lines.push_back(s);
  }
  std::vector<std::string> of(const std::string& who) {
    std::lock_guard<std::mutex> g{m};
    std::vector<std::string> out;
    for (auto& l : lines)
      if (l.rfind(who + " ", 0) == 0)
        out.push_back(l.substr(who.size() + 1));
    return out;
  }
  bool has(const std::string& line) { return count(line) > 0; }
  long count(const std::string& line) {
    std::lock_guard<std::mutex> g{m};
    return std::count(lines.begin(), lines.end(), line);
  }
};

/// Waits (at most 5 s) until `line` is in the journal.
bool eventually(journal& j, const std::string& line) {
  for (int i = 0; i < 500; ++i) {
    if (j.has(line))
      return true;
    std::this_thread::sleep_for(milliseconds(10));
  }
  return false;
}

/// A replica stand-in that writes down its links, re-configurations and
/// stop; `refuse_reconf`: it cannot stay (as a replica without a snapshot).
caf::behavior fake_replica(caf::event_based_actor* self, std::string name,
                           std::shared_ptr<journal> j, bool refuse_reconf) {
  return {
    [=](actors::peer_atom, int32_t role, int32_t index, caf::actor&,
        std::string& route) {
      j->add(name + " peer " + std::to_string(role) + "/" + std::to_string(index)
             + (route.empty() ? "" : " via " + route));
    },
    [=](actors::reconf_atom, std::string&, int64_t version)
      -> caf::result<std::string, int64_t> {
      j->add(name + " reconf " + std::to_string(version));
      if (refuse_reconf)
        return {name + " holds no snapshot", int64_t{-1}};
      return {std::string{}, version};
    },
    [=](actors::stop_atom) {
      j->add(name + " stop");
      self->quit();
    },
  };
}

/// A device stand-in: builds a fake replica named after the spec's label
/// (with `refuse_reconf`, the first it builds cannot stay); with `hold` it
/// keeps every deploy request unanswered until told `ok_atom`, as a node
/// busy building (or lost) would.
struct fake_device_state {
  std::vector<std::pair<caf::response_promise, std::string>> held;
  int built = 0;
};

caf::behavior fake_device(caf::stateful_actor<fake_device_state>* self,
                          std::shared_ptr<journal> j, bool hold,
                          bool refuse_reconf) {
  return {
    [=](actors::deploy_atom, std::string& spec, std::string& state) {
      auto s = json::parse(spec);
      auto label = s["label"].get<std::string>();
      j->add("device deploy " + label
             + (s.contains("restore_version") ? " restore" : " ship " + state));
      auto rp = self->make_response_promise();
      if (hold)
        self->state.held.emplace_back(rp, label);
      else
        rp.deliver(std::string{},
                   self->spawn(fake_replica, label, j,
                               refuse_reconf && self->state.built++ == 0));
      return rp;
    },
    [=](caf::ok_atom) {
      for (auto& [rp, label] : self->state.held)
        rp.deliver(std::string{}, self->spawn(fake_replica, label, j, false));
      self->state.held.clear();
    },
  };
}

actors::stage_member member(int r, int device, bool keep = false,
                            int64_t restore = -1) {
  actors::stage_member m;
  m.replica = r;
  m.device = device;
  m.endpoint = "127.0.0.1:" + std::to_string(9000 + device);
  m.spec = {{"label", "s1r" + std::to_string(r) + "@d" + std::to_string(device)}};
  m.keep = keep;
  m.restore_version = restore;
  m.build_timeout_ms = 5000;
  return m;
}

actors::stage_deployment deployment(std::vector<actors::stage_member> members,
                                    int64_t version = -1) {
  actors::stage_deployment d;
  d.stage = 1;
  d.first_layer = 2;
  d.end_layer = 4;
  d.version = version;
  d.members = std::move(members);
  return d;
}

struct deployed {
  std::string error;
  std::vector<caf::actor> replicas;
  json report;
};

deployed deploy(caf::scoped_actor& self, const actors::stage_actor& stage,
                const actors::stage_deployment& d,
                const std::vector<caf::actor>& devices,
                const std::string& state) {
  deployed out;
  self->request(stage, std::chrono::seconds(10), actors::deploy_atom::value,
                to_json(d).dump(), devices, state)
    .receive(
      [&](std::string& err, std::vector<caf::actor>& rs, std::string& report) {
        out.error = err;
        out.replicas = rs;
        out.report = json::parse(report);
      },
      [&](caf::error& e) { out.error = "request failed: " + caf::to_string(e); });
  return out;
}

using L = std::vector<std::string>;

} // namespace

TEST_CASE("a stage deployment and its wiring travel as JSON, and a bad one is "
          "refused naming the field") {
  auto d = deployment({member(0, 3), member(1, 5, true, 7)}, 7);
  auto back = actors::stage_deployment_from_json(to_json(d));
  CHECK(to_json(back) == to_json(d));
  CHECK(back.members[1].keep);
  CHECK(back.members[1].restore_version == 7);

  auto j = to_json(d);
  j["members"][1]["replica"] = 0;
  CHECK_THROWS_WITH(actors::stage_deployment_from_json(j),
                    Catch::Contains("members[1].replica")
                      && Catch::Contains("replica order"));
  j = to_json(d);
  j["members"][0].erase("spec");
  CHECK_THROWS_WITH(actors::stage_deployment_from_json(j),
                    Catch::Contains("stage deployment") && Catch::Contains("spec"));
  j = to_json(d);
  j["members"] = json::array();
  CHECK_THROWS_WITH(actors::stage_deployment_from_json(j),
                    Catch::Contains("at least one member"));
  j = to_json(d);
  j["extra"] = 1;
  CHECK_THROWS_WITH(actors::stage_deployment_from_json(j), Catch::Contains("extra"));

  actors::stage_wiring w;
  w.prev = {{0, 1, "h:1"}};
  w.next = {{0, 4, "h:4"}, {1, 6, ""}};
  w.backup = {0, 2, "h:2"};
  auto wb = actors::stage_wiring_from_json(to_json(w));
  CHECK(to_json(wb) == to_json(w));
  auto wj = to_json(w);
  wj["next"][1].erase("device");
  CHECK_THROWS_WITH(actors::stage_wiring_from_json(wj),
                    Catch::Contains("stage wiring") && Catch::Contains("next[1].device"));
}

TEST_CASE("a link takes the data plane only between two devices that both "
          "have one") {
  actors::stage_peer far{0, 4, "h:4"};
  CHECK(actors::link_route(1, "h:1", far) == "h:4");
  CHECK(actors::link_route(4, "h:4", far).empty()); // same device
  CHECK(actors::link_route(1, "", far).empty());    // no data plane here
  CHECK(actors::link_route(1, "h:1", {0, 6, ""}).empty());
}

TEST_CASE("a stage actor builds its group on the nodes, links it, keeps the "
          "members that stay, rebuilds the one that cannot, and stops its "
          "replicas when it stops") {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  auto j = std::make_shared<journal>();
  auto dev3 = sys.spawn(fake_device, j, false, false);
  auto dev5 = sys.spawn(fake_device, j, false, true); // its replica cannot stay
  auto dev6 = sys.spawn(fake_device, j, false, false);
  auto stage = actors::spawn_stage(sys, 1, 2, 4);

  // First deployment: both members built from the shipped state.
  auto first = deploy(self, stage, deployment({member(0, 3), member(1, 5)}),
                      {dev3, dev5}, "STATE");
  REQUIRE(first.error.empty());
  REQUIRE(first.replicas.size() == 2);
  CHECK(first.report["kept"].empty());
  CHECK(first.report["shipped"] == 2);
  CHECK(j->has("device deploy s1r0@d3 ship STATE"));
  CHECK(j->has("device deploy s1r1@d5 ship STATE"));

  // Wiring: the supervisor, the neighbours, the ring, replica 0's backup.
  actors::stage_wiring w;
  w.prev = {{0, 1, "h:1"}};
  w.next = {{0, 3, "h:3"}};
  w.backup = {0, 2, "h:2"};
  auto peer = sys.spawn(fake_device, j, false, false); // any actor will do
  std::string wired = "no reply";
  self->request(stage, std::chrono::seconds(5), actors::wire_atom::value,
                caf::actor_cast<caf::actor>(self), std::vector<caf::actor>{peer},
                std::vector<caf::actor>{peer}, peer, to_json(w).dump())
    .receive([&](std::string& e) { wired = e; },
             [&](caf::error& e) { wired = caf::to_string(e); });
  REQUIRE(wired.empty());
  REQUIRE(eventually(*j, "s1r1@d5 peer 2/0 via 127.0.0.1:9003"));
  REQUIRE(eventually(*j, "s1r0@d3 peer 4/0 via h:2"));
  CHECK(j->of("s1r0@d3")
        == L{"peer 3/0", "peer 0/0 via h:1", "peer 1/0", // next: same device 3
             "peer 2/0 via 127.0.0.1:9005", "peer 4/0 via h:2"});
  CHECK(j->of("s1r1@d5")
        == L{"peer 3/0", "peer 0/0 via h:1", "peer 1/0 via h:3",
             "peer 2/0 via 127.0.0.1:9003"});

  // Second deployment at version 7: d3's member stays, d5's is asked to
  // stay but cannot (rebuilt from its node's snapshot), d6 joins.
  auto second = deploy(self, stage,
                       deployment({member(0, 3, true, 7), member(1, 5, true, 7),
                                   member(2, 6)},
                                  7),
                       {dev3, dev5, dev6}, "STATE7");
  REQUIRE(second.error.empty());
  REQUIRE(second.replicas.size() == 3);
  CHECK(second.replicas[0] == first.replicas[0]); // the same actor
  CHECK(second.replicas[1] != first.replicas[1]);
  REQUIRE(second.report["kept"].size() == 1);
  CHECK(second.report["kept"][0]["replica"] == "s1r0@d3");
  CHECK(second.report["kept"][0]["restored_version"] == 7);
  CHECK(second.report["rebuilt"] == 1);
  CHECK(second.report["restored_locally"] == 1);
  CHECK(second.report["shipped"] == 1);
  CHECK(eventually(*j, "s1r1@d5 stop")); // the stop goes to the stand-in asynchronously
  CHECK(j->has("device deploy s1r1@d5 restore"));
  CHECK(j->has("device deploy s1r2@d6 ship STATE7"));

  // Third: d3's member leaves the group (not kept): it is stopped.
  auto third = deploy(self, stage, deployment({member(0, 6, true), member(1, 5, true)}, 7),
                      {dev6, dev5}, "");
  // d6's running member is replica 2's actor; kept as replica 0 now.
  REQUIRE(third.error.empty());
  CHECK(third.replicas[0] == second.replicas[2]);
  CHECK(third.replicas[1] == second.replicas[1]);
  REQUIRE(eventually(*j, "s1r0@d3 stop"));

  // A deployment that does not add up is refused, naming the problem.
  auto bad = deploy(self, stage, deployment({member(0, 6)}), {}, "");
  CHECK_THAT(bad.error, Catch::Contains("0 device actors for 1 members"));

  self->send(stage, actors::stop_atom::value);
  CHECK(eventually(*j, "s1r2@d6 stop"));
  CHECK(eventually(*j, "s1r1@d5 stop"));
  for (int i = 0; i < 500 && j->count("s1r1@d5 stop") < 2; ++i)
    std::this_thread::sleep_for(milliseconds(10));
  CHECK(j->count("s1r1@d5 stop") == 2); // the refused one, then the rebuilt one
  for (auto& a : {dev3, dev5, dev6, peer})
    self->send_exit(a, caf::exit_reason::user_shutdown);
}

TEST_CASE("a replica a node hands over after its stage actor was stopped "
          "is stopped, and the stage actor quits only then") {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  auto j = std::make_shared<journal>();
  auto slow = sys.spawn(fake_device, j, true, false); // holds its answers
  auto stage = actors::spawn_stage(sys, 1, 2, 4);
  self->monitor(stage);
  self->send(stage, actors::deploy_atom::value,
             to_json(deployment({member(0, 3)})).dump(),
             std::vector<caf::actor>{slow}, std::string("STATE"));
  REQUIRE(eventually(*j, "device deploy s1r0@d3 ship STATE"));
  // The supervisor gives the deployment up (a device was lost).
  self->send(stage, actors::stop_atom::value);
  bool quit_early = false;
  self->receive([&](caf::down_msg&) { quit_early = true; },
                caf::after(milliseconds(200)) >> [] {});
  CHECK_FALSE(quit_early); // a build is still pending
  self->send(slow, caf::ok_atom::value); // the node hands the replica over
  CHECK(eventually(*j, "s1r0@d3 stop"));
  bool quit = false;
  self->receive([&](caf::down_msg&) { quit = true; },
                caf::after(std::chrono::seconds(5)) >> [] {});
  CHECK(quit);
  self->send_exit(slow, caf::exit_reason::user_shutdown);
}

TEST_CASE("a stage actor stopped with a device named lost does not wait for "
          "the builds asked of it") {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  auto j = std::make_shared<journal>();
  auto hung = sys.spawn(fake_device, j, true, false); // never answers
  auto stage = actors::spawn_stage(sys, 1, 2, 4);
  self->monitor(stage);
  self->send(stage, actors::deploy_atom::value,
             to_json(deployment({member(0, 3)})).dump(),
             std::vector<caf::actor>{hung}, std::string("STATE"));
  REQUIRE(eventually(*j, "device deploy s1r0@d3 ship STATE"));
  self->send(stage, actors::stop_atom::value, std::vector<int32_t>{3});
  bool quit = false;
  self->receive([&](caf::down_msg&) { quit = true; },
                caf::after(std::chrono::seconds(2)) >> [] {});
  CHECK(quit); // well before the build's 5 s timeout
  self->send_exit(hung, caf::exit_reason::user_shutdown);
}
