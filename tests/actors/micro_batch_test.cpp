// Micro-batch actors (issue #20, item 6): the progress a micro-batch actor
// keeps, the actor itself and the relay that takes replicas' reports to it
// (no processes).
#include "asteroid/actors/micro_batch.hpp"
#include "asteroid/actors/micro_batch_relay.hpp"

#include <catch2/catch.hpp>

#include <chrono>

using namespace asteroid;
using actors::pass_backward;
using actors::pass_forward;
using nlohmann::json;

namespace {

/// Stage 0 on two replicas (rows 0-5 on device 0, 5-8 on device 1), stage 1
/// on one (rows 0-8 on device 2).
actors::micro_batch_route two_stage_route() {
  actors::micro_batch_route r;
  r.step = 7;
  r.micro_batch = 1;
  r.stages = {{{0, 0, "node0", 0, 5}, {1, 1, "node1", 5, 8}},
              {{0, 2, "node2", 0, 8}}};
  return r;
}

/// "s<stage>r<replica> <pass>" of each piece `where` says the micro-batch
/// waits on.
std::vector<std::string> waiting(const json& where) {
  std::vector<std::string> out;
  for (auto& w : where["waiting"])
    out.push_back("s" + std::to_string(w["stage"].get<int>()) + "r"
                  + std::to_string(w["replica"].get<int>()) + " "
                  + w["pass"].get<std::string>());
  return out;
}

using W = std::vector<std::string>;

} // namespace

TEST_CASE("a micro-batch's progress follows its passes forward through the "
          "stages and back, and says where it waits") {
  actors::micro_batch_progress p{two_stage_route()};
  auto w = p.where();
  CHECK(w["step"] == 7);
  CHECK(w["micro_batch"] == 1);
  CHECK(waiting(w) == W{"s0r0 forward", "s0r1 forward"});
  CHECK(w["waiting"][1]["node"] == "node1");
  CHECK(w["waiting"][1]["device"] == 1);
  CHECK(w["waiting"][1]["rows"] == json{5, 8});

  CHECK(p.report(0, 1, pass_forward).empty());
  CHECK(waiting(p.where()) == W{"s0r0 forward"});
  CHECK(p.report(0, 0, pass_forward).empty());
  w = p.where();
  CHECK(w["forward_done"] == json{0});
  CHECK(waiting(w) == W{"s1r0 forward"});

  CHECK(p.report(1, 0, pass_forward).empty());
  CHECK(waiting(p.where()) == W{"s1r0 backward"});
  CHECK(p.report(1, 0, pass_backward).empty());
  w = p.where();
  CHECK(w["forward_done"] == json{0, 1});
  CHECK(w["backward_done"] == json{1});
  CHECK(waiting(w) == W{"s0r0 backward", "s0r1 backward"});
  CHECK_FALSE(p.finished());

  CHECK(p.report(0, 0, pass_backward).empty());
  CHECK_FALSE(p.finished());
  CHECK(p.report(0, 1, pass_backward).empty());
  CHECK(p.finished());
  w = p.where();
  CHECK(w["finished"] == true);
  CHECK(w["waiting"].empty());
  CHECK(w["backward_done"] == json{0, 1});
  CHECK(p.reports() == 6);
}

TEST_CASE("a micro-batch's progress refuses reports that match no piece, "
          "repeat a pass or come out of order, and changes nothing") {
  actors::micro_batch_progress p{two_stage_route()};
  CHECK(p.report(2, 0, pass_forward).find("stage 2 has no replica 0") == 0);
  CHECK(p.report(-1, 0, pass_forward).find("stage -1") == 0);
  CHECK(p.report(1, 1, pass_forward).find("stage 1 has no replica 1") == 0);
  CHECK(p.report(0, 0, 2) == "unknown pass 2");
  CHECK(p.report(0, 0, pass_backward)
        == "backward pass reported before the forward pass");
  CHECK(p.report(0, 0, pass_forward).empty());
  CHECK(p.report(0, 0, pass_forward) == "forward pass reported twice");
  CHECK(p.reports() == 1);
  CHECK(waiting(p.where()) == W{"s0r1 forward"});
}

TEST_CASE("a micro-batch actor answers where its micro-batch is, ignores "
          "stray messages and quits after the last backward pass") {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  auto mb = actors::spawn_micro_batch(sys, two_stage_route());
  self->monitor(mb);
  auto where = [&] {
    json out;
    self->request(mb, std::chrono::seconds(5), actors::where_atom::value)
      .receive([&](std::string& text) { out = json::parse(text); },
               [&](caf::error& err) { FAIL(sys.render(err)); });
    return out;
  };
  auto tell = [&](int stage, int replica, int pass) {
    self->send(mb, actors::progress_atom::value, int32_t(stage),
               int32_t(replica), int32_t(pass));
  };
  tell(0, 0, pass_forward);
  tell(0, 1, pass_forward);
  tell(1, 0, pass_forward);
  tell(3, 0, pass_forward);               // no such stage: dropped
  caf::anon_send(caf::actor_cast<caf::actor>(mb), std::string("hello")); // dropped
  auto w = where();
  CHECK(w["forward_done"] == json{0, 1});
  CHECK(waiting(w) == W{"s1r0 backward"});
  tell(1, 0, pass_backward);
  tell(0, 0, pass_backward);
  tell(0, 1, pass_backward);
  bool down = false;
  self->receive([&](caf::down_msg& dm) { down = dm.source == mb.address(); },
                caf::after(std::chrono::seconds(10)) >> [] {});
  CHECK(down);
}

TEST_CASE("a micro-batch actor stops when told to") {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  auto mb = actors::spawn_micro_batch(sys, two_stage_route());
  self->monitor(mb);
  self->send(mb, actors::stop_atom::value);
  bool down = false;
  self->receive([&](caf::down_msg&) { down = true; },
                caf::after(std::chrono::seconds(10)) >> [] {});
  CHECK(down);
}

TEST_CASE("the micro-batch relay takes each pass of a report to its "
          "micro-batch's actor, drops what matches no micro-batch, and takes "
          "a step's actors only from its own process") {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  auto relay = actors::spawn_micro_batch_relay(sys);
  auto route = two_stage_route();
  route.micro_batch = 0;
  auto mb0 = actors::spawn_micro_batch(sys, route);
  route.micro_batch = 1;
  auto mb1 = actors::spawn_micro_batch(sys, route);
  self->monitor(mb0);
  self->monitor(mb1);
  const int64_t step = 7;
  self->send(relay, actors::adopt_atom::value, step, int64_t{3},
             std::vector<caf::actor>{caf::actor_cast<caf::actor>(mb0),
                                     caf::actor_cast<caf::actor>(mb1)});
  // Without a sender, as a message from another process may come: ignored,
  // step 8 stays unknown.
  caf::anon_send(relay, actors::adopt_atom::value, int64_t{8}, int64_t{3},
                 std::vector<caf::actor>{caf::actor_cast<caf::actor>(mb0)});
  auto report = [&](int64_t at, int stage, int replica, std::vector<int32_t> passes,
                    int64_t generation = 3) {
    self->send(relay, actors::progress_atom::value, generation, at, int32_t(stage),
               int32_t(replica), std::move(passes));
  };
  // Every forward and backward pass of both micro-batches (2 * mb + pass),
  // in five reports, plus passes that name no micro-batch, a report of an
  // unknown step and one of a replica of an earlier deployment.
  report(step, 0, 0, {0, 2, 5});
  report(step, 0, 1, {0, 2, -1});
  report(step, 1, 0, {0, 1, 2, 3, 4});
  report(8, 0, 0, {0});
  report(step, 0, 0, {1, 3}, 2);
  report(step, 0, 0, {1, 3});
  report(step, 0, 1, {1, 3});
  // Each actor quits after its micro-batch's last backward pass.
  bool down0 = false, down1 = false;
  for (int i = 0; i < 2; ++i)
    self->receive(
      [&](caf::down_msg& dm) {
        down0 |= dm.source == mb0.address();
        down1 |= dm.source == mb1.address();
      },
      caf::after(std::chrono::seconds(10)) >> [] {});
  CHECK(down0);
  CHECK(down1);
  // 12 passes: three replicas' forward and backward of two micro-batches
  // (micro-batch 2's passes, 4 and 5, and -1 were dropped).
  int64_t relayed = -2;
  self->request(relay, std::chrono::seconds(5), actors::release_atom::value, step)
    .receive([&](int64_t n) { relayed = n; },
             [&](caf::error& err) { FAIL(sys.render(err)); });
  CHECK(relayed == 12);
  self->request(relay, std::chrono::seconds(5), actors::release_atom::value, step)
    .receive([&](int64_t n) { relayed = n; },
             [&](caf::error& err) { FAIL(sys.render(err)); });
  CHECK(relayed == 0); // released: forgotten
  self->send(relay, actors::stop_atom::value);
}
