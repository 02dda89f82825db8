// The supervisor actor (supervisor_actor.hpp): its state machine, and a
// program that spawns it, subscribes to its records and stops the job by
// message. In-process devices.
#include "asteroid/actors/supervisor_actor.hpp"

#include "job_test_helpers.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <set>
#include <sstream>
#include <thread>

using namespace asteroid;
using namespace asteroid::test;
using actors::job_state;
using nlohmann::json;

namespace {

/// Receives the next job event within 60 s (fails the test otherwise).
json next_event(caf::scoped_actor& self) {
  json ev;
  bool got = false;
  self->receive(
    [&](actors::job_event_atom, const std::string& text) {
      ev = json::parse(text);
      got = true;
    },
    caf::after(std::chrono::seconds(60)) >> [] {});
  REQUIRE(got);
  return ev;
}

json status_of(caf::scoped_actor& self, const actors::supervisor_actor& sup) {
  json status;
  self->request(sup, std::chrono::seconds(10), actors::job_status_atom::value)
    .receive([&](const std::string& text) { status = json::parse(text); },
             [&](const caf::error& e) { FAIL("no status: " << caf::to_string(e)); });
  return status;
}

actors::supervisor_actor spawn_for(in_process& env, const actors::job_spec& job,
                                   std::shared_ptr<data::dataset> train) {
  return actors::spawn_supervisor(*env.sys, job, env.devices,
                                  fresh_model(job.model, job.seed),
                                  std::move(train), nullptr);
}

void subscribe(caf::scoped_actor& self, const actors::supervisor_actor& sup) {
  self->send(sup, actors::job_subscribe_atom::value,
             caf::actor_cast<caf::actor>(self));
}

/// Asks `sup` to add the node at `endpoint`: its error text ("" accepted).
std::string add_node(caf::scoped_actor& self, const actors::supervisor_actor& sup,
                     const std::string& endpoint) {
  std::string error;
  self->request(sup, std::chrono::seconds(10), actors::job_add_atom::value, endpoint)
    .receive([&](const std::string& e) { error = e; },
             [&](const caf::error& e) { FAIL(caf::to_string(e)); });
  return error;
}

actors::job_spec two_stage_mlp(int64_t steps) {
  auto job = base_job("mlp", make_plan(16, 2, {{0, 2, {0, 1}, {3, 5}},
                                               {2, 3, {2}, {8}}}));
  job.max_steps = steps;
  return job;
}

} // namespace

TEST_CASE("the job state machine goes connecting, deploying, running and "
          "recovering in that order, may end from any live state, and never "
          "leaves a final one") {
  using s = job_state;
  actors::job_state_machine m;
  CHECK(m.state() == s::idle);
  CHECK_FALSE(m.advance(s::running));   // not connected yet
  CHECK_FALSE(m.advance(s::deploying));
  CHECK(m.advance(s::connecting));
  CHECK_FALSE(m.advance(s::recovering)); // nothing deployed to recover
  CHECK(m.advance(s::deploying));
  CHECK(m.advance(s::running));
  CHECK_FALSE(m.advance(s::running));
  CHECK(m.advance(s::recovering));
  CHECK_FALSE(m.advance(s::deploying));
  CHECK(m.advance(s::running));
  CHECK(m.advance(s::finished));
  CHECK(m.state() == s::finished);
  for (auto to : {s::idle, s::connecting, s::running, s::failed})
    CHECK_FALSE(m.advance(to));
  CHECK(m.state() == s::finished);
  for (auto from : {s::idle, s::connecting, s::deploying, s::running, s::recovering})
    for (auto to : {s::finished, s::failed})
      CHECK(actors::allowed_transition(from, to));
  for (auto st : {s::idle, s::connecting, s::deploying, s::running,
                  s::recovering, s::finished, s::failed})
    CHECK(actors::job_state_from_string(actors::to_string(st)) == st);
  CHECK_FALSE(actors::job_state_from_string("paused"));
}

TEST_CASE("a program spawns the supervisor actor, subscribes to its records, "
          "stops the job by message after 5 steps, and gets the weights of "
          "single-device training over the steps that ran (mlp, 3 in-process "
          "devices)") {
  auto train = synthetic(16 * 40);
  auto job = two_stage_mlp(40);
  // Emulated 10x slower, so the 40 steps last far longer than this thread
  // takes to answer the fifth step's record, however busy the host.
  in_process env{3, 10.0};
  auto sup = spawn_for(env, job, train);
  caf::scoped_actor self{*env.sys};
  subscribe(self, sup);
  CHECK(next_event(self) == json({{"event", "state"}, {"state", "idle"}}));
  CHECK(status_of(self, sup)["state"] == "idle");
  self->send(sup, actors::job_start_atom::value);
  std::vector<std::string> states;
  int64_t iterations = 0;
  bool stop_sent = false;
  json done;
  while (states.empty() || !actors::is_final(*actors::job_state_from_string(states.back()))) {
    auto ev = next_event(self);
    auto event = ev.value("event", std::string());
    if (event == "state") {
      states.push_back(ev["state"]);
    } else if (event == "iteration") {
      ++iterations;
      CHECK(ev["step"] == iterations);
      if (iterations == 5 && !stop_sent) {
        CHECK(status_of(self, sup)["state"] == "running");
        self->send(sup, actors::job_stop_atom::value);
        stop_sent = true;
      }
    } else if (event == "done") {
      done = ev;
    }
  }
  CHECK(states == std::vector<std::string>{"connecting", "deploying", "running",
                                           "finished"});
  auto r = actors::await_job(*env.sys, sup);
  CHECK(r.stopped);
  // The step that ran when the stop came, and one already started ahead,
  // complete; no later step starts (how many ran before the stop arrived
  // depends on this thread's speed, so only an early end is checked).
  CHECK(r.steps >= 5);
  CHECK(r.steps < 40);
  CHECK(iterations == r.steps);
  CHECK(done["stopped"] == true);
  CHECK(done["steps"] == r.steps);
  auto status = status_of(self, sup);
  CHECK(status["state"] == "finished");
  CHECK(status["step"] == r.steps);
  CHECK(status["steps"] == 40);
  CHECK(status["stop_requested"] == true);
  job.max_steps = r.steps;
  auto diff = max_abs_diff(r.model, reference(job, *train));
  INFO("max abs diff " << diff);
  CHECK(diff < 1e-4);
  // A later start is ignored: the job stays finished.
  self->send(sup, actors::job_start_atom::value);
  CHECK(status_of(self, sup)["state"] == "finished");
}

TEST_CASE("a job that fails: await_job throws the step driver's error, "
          "subscribers see the state 'failed' and status names the error") {
  auto train = synthetic(16 * 4);
  // Layers 0-5 of a 3-layer mlp: refused before anything is deployed.
  auto job = base_job("mlp", make_plan(16, 2, {{0, 5, {0}, {8}}}));
  in_process env{1};
  auto sup = spawn_for(env, job, train);
  caf::scoped_actor self{*env.sys};
  subscribe(self, sup);
  self->send(sup, actors::job_start_atom::value);
  std::string last;
  while (last != "failed" && last != "finished") {
    auto ev = next_event(self);
    if (ev["event"] == "state")
      last = ev["state"];
  }
  CHECK(last == "failed");
  std::string what;
  try {
    actors::await_job(*env.sys, sup);
  } catch (const std::exception& e) {
    what = e.what();
  }
  INFO(what);
  CHECK(what.find("layer") != std::string::npos);
  auto status = status_of(self, sup);
  CHECK(status["state"] == "failed");
  CHECK(status["error"] == what);
}

TEST_CASE("the supervisor actor ignores state changes and outcomes that do "
          "not come from its own step driver, and a stop before start "
          "finishes the job with no step run") {
  auto train = synthetic(16 * 4);
  auto job = two_stage_mlp(4);
  in_process env{3};
  auto sup = spawn_for(env, job, train);
  caf::scoped_actor self{*env.sys};
  self->send(sup, actors::job_event_atom::value,
             json{{"event", "state"}, {"state", "finished"}}.dump());
  auto forged = std::make_shared<actors::job_outcome>();
  forged->state = job_state::finished;
  forged->result.steps = 99;
  self->send(sup, actors::job_outcome_atom::value,
             actors::job_outcome_ptr{forged});
  CHECK(status_of(self, sup)["state"] == "idle");
  self->send(sup, actors::job_stop_atom::value);
  auto r = actors::await_job(*env.sys, sup);
  CHECK(r.stopped);
  CHECK(r.steps == 0);
  CHECK(status_of(self, sup)["state"] == "finished");
}

TEST_CASE("a program removes a device from a running job by message: the "
          "plan is patched around it at the next step boundary, the "
          "replicas elsewhere keep running, and the weights equal "
          "single-device training (mlp, 3 in-process devices)") {
  auto train = synthetic(16 * 30);
  auto job = two_stage_mlp(30);
  in_process env{3, 10.0}; // see the stop test: the removal arrives mid-job
  auto sup = spawn_for(env, job, train);
  caf::scoped_actor self{*env.sys};
  auto remove = [&](int32_t device) {
    std::string reply = "no reply";
    self->request(sup, std::chrono::seconds(10), actors::job_remove_atom::value, device)
      .receive([&](const std::string& err) { reply = err; },
               [&](const caf::error& e) { reply = caf::to_string(e); });
    return reply;
  };
  CHECK(remove(1).find("idle") != std::string::npos); // not started
  subscribe(self, sup);
  self->send(sup, actors::job_start_atom::value);
  json removed;
  std::string last;
  int64_t iterations = 0;
  while (last != "finished" && last != "failed") {
    auto ev = next_event(self);
    if (ev["event"] == "state") {
      last = ev["state"];
    } else if (ev["event"] == "iteration" && ++iterations == 3) {
      CHECK(remove(7).find("no device 7") != std::string::npos);
      CHECK(remove(1) == "");
    } else if (ev["event"] == "fault" && ev["fault"] == "removed") {
      removed = ev;
    }
  }
  REQUIRE(last == "finished");
  auto r = actors::await_job(*env.sys, sup);
  CHECK(r.steps == 30);
  CHECK_FALSE(r.stopped);
  REQUIRE(removed.is_object());
  CHECK(removed["nodes"] == json::array({"dev1"}));
  // Removed between two steps after the third, with nothing to replay.
  CHECK(removed["step"].get<int64_t>() >= 3);
  CHECK(removed["step"].get<int64_t>() < 30);
  REQUIRE(r.plan.num_stages() == 2);
  CHECK(r.plan.stages[0].devices == std::vector<int>{0});
  CHECK(r.plan.stages[1].devices == std::vector<int>{2});
  // dev0's replica of stage 0 and dev2's of stage 1 kept their layers, so
  // they kept running.
  std::set<std::string> kept;
  for (auto& k : removed["kept"])
    kept.insert(k["replica"].get<std::string>().substr(0, 4));
  CHECK(kept == std::set<std::string>{"s0r0", "s1r0"});
  // Their state at the boundary is in their own nodes' snapshots: nothing
  // was gathered from the replicas, copied or sent.
  CHECK(removed["state_from"] == "snapshots");
  CHECK(removed["copied_snapshots"] == 0);
  CHECK(removed["states_sent"] == 0);
  CHECK(r.fault_events.size() == 1); // no loss, no detection
  auto diff = max_abs_diff(r.model, reference(job, *train));
  INFO("max abs diff " << diff);
  CHECK(diff < 1e-4);
  CHECK(remove(0).find("finished") != std::string::npos);
}

TEST_CASE("removing the last device of a job is refused with a record, and "
          "the job runs to its end (mlp, 1 in-process device)") {
  auto train = synthetic(16 * 20);
  auto job = base_job("mlp", make_plan(16, 2, {{0, 3, {0}, {8}}}));
  job.max_steps = 20;
  in_process env{1, 10.0}; // the removal arrives mid-job (see the stop test)
  auto sup = spawn_for(env, job, train);
  caf::scoped_actor self{*env.sys};
  subscribe(self, sup);
  self->send(sup, actors::job_start_atom::value);
  json refused;
  std::string last;
  while (last != "finished" && last != "failed") {
    auto ev = next_event(self);
    if (ev["event"] == "state")
      last = ev["state"];
    else if (ev["event"] == "iteration" && ev["step"] == 2)
      self->send(sup, actors::job_remove_atom::value, int32_t{0});
    else if (ev["event"] == "fault" && ev["fault"] == "remove_refused")
      refused = ev;
  }
  CHECK(last == "finished");
  REQUIRE(refused.is_object());
  CHECK(refused["nodes"] == json::array({"dev0"}));
  auto r = actors::await_job(*env.sys, sup);
  CHECK(r.steps == 20);
  CHECK(r.plan.stages.at(0).devices == std::vector<int>{0});
}

TEST_CASE("terminating the supervisor actor stops its job at the next step "
          "boundary: the job's metrics file ends with a stopped 'done' "
          "(mlp, 3 in-process devices)") {
  auto train = synthetic(16 * 40);
  auto job = two_stage_mlp(40);
  job.metrics_path = std::string(ASTEROID_TEST_TMP) + "/supervisor-exit.jsonl";
  in_process env{3, 10.0}; // the exit arrives mid-job (see the stop test)
  auto sup = spawn_for(env, job, train);
  caf::scoped_actor self{*env.sys};
  subscribe(self, sup);
  self->send(sup, actors::job_start_atom::value);
  for (int64_t iterations = 0; iterations < 3;)
    if (next_event(self)["event"] == "iteration")
      ++iterations;
  caf::anon_send_exit(sup, caf::exit_reason::user_shutdown);
  // Bounded wait for the step driver to write its last record.
  json done;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!done.is_object() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::istringstream lines{slurp(job.metrics_path)};
    for (std::string line; std::getline(lines, line);) {
      auto rec = json::parse(line, nullptr, false);
      if (!rec.is_discarded() && rec.value("event", std::string()) == "done")
        done = rec;
    }
  }
  REQUIRE(done.is_object());
  CHECK(done["stopped"] == true);
  CHECK(done["steps"].get<int64_t>() >= 3);
  CHECK(done["steps"].get<int64_t>() < 40);
}

TEST_CASE("adding a node to a job that cannot plan with it is refused with a "
          "record, and the job runs to its end (mlp, fixed plan, in-process "
          "devices)") {
  auto train = synthetic(16 * 20);
  auto job = two_stage_mlp(20);
  in_process env{3, 10.0}; // the request arrives mid-job (see the stop test)
  auto sup = spawn_for(env, job, train);
  caf::scoped_actor self{*env.sys};
  auto add = [&](const std::string& endpoint) { return add_node(self, sup, endpoint); };
  CHECK(add("127.0.0.1:27399").find("idle") != std::string::npos); // not started
  subscribe(self, sup);
  self->send(sup, actors::job_start_atom::value);
  json refused;
  std::string last;
  while (last != "finished" && last != "failed") {
    auto ev = next_event(self);
    if (ev["event"] == "state") {
      last = ev["state"];
    } else if (ev["event"] == "iteration" && ev["step"] == 2) {
      CHECK(add("no-port-here").find("no-port-here") != std::string::npos);
      CHECK(add("127.0.0.1:27399") == "");
    } else if (ev["event"] == "fault" && ev["fault"] == "add_refused") {
      refused = ev;
    }
  }
  CHECK(last == "finished");
  REQUIRE(refused.is_object());
  CHECK(refused["endpoint"] == "127.0.0.1:27399");
  CHECK(refused["reason"].get<std::string>().find("fixed plan") != std::string::npos);
  auto r = actors::await_job(*env.sys, sup);
  CHECK(r.steps == 20);
  auto diff = max_abs_diff(r.model, reference(job, *train));
  INFO("max abs diff " << diff);
  CHECK(diff < 1e-4);
}

TEST_CASE("a node added by message joins at a step boundary: its links are "
          "measured, the planner puts it to work, and the weights equal "
          "single-device training (mlp, planner, 3 processes)") {
  // Nodes 0 and 1 run the job, emulated 4x slower than node 2, which is
  // added after the third step: a plan that leaves the fastest device idle
  // is never the planner's best.
  auto opts = cluster_options(3, 27390);
  opts.slowdowns = {4.0, 4.0, 1.0};
  actors::local_cluster cluster{opts};
  auto job = base_job("mlp", make_plan(16, 2, {}));
  job.plan.reset();
  job.planner = "asteroid";
  job.max_steps = 20;
  job.nodes = {cluster.endpoints()[0], cluster.endpoints()[1]};
  auto train = synthetic(16 * 20);
  caf::actor_system_config cfg;
  actors::configure(cfg);
  caf::actor_system sys{cfg};
  auto devices = actors::connect_all(sys, job.nodes, std::chrono::seconds(3));
  auto sup = actors::spawn_supervisor(sys, job, devices,
                                      fresh_model(job.model, job.seed), train,
                                      nullptr);
  caf::scoped_actor self{sys};
  auto add = [&](const std::string& endpoint) { return add_node(self, sup, endpoint); };
  subscribe(self, sup);
  self->send(sup, actors::job_start_atom::value);
  json added, refused;
  std::vector<json> iterations;
  std::string last;
  while (last != "finished" && last != "failed") {
    auto ev = next_event(self);
    if (ev["event"] == "state") {
      last = ev["state"];
    } else if (ev["event"] == "iteration") {
      iterations.push_back(ev);
      if (ev["step"] == 3) {
        CHECK(add(cluster.endpoints()[2]) == "");
        CHECK(add(cluster.endpoints()[0]) == ""); // refused at the boundary
      }
    } else if (ev["event"] == "fault" && ev["fault"] == "added") {
      added = ev;
      // The supervisor counts the new device among the job's.
      std::string error;
      self->request(sup, std::chrono::seconds(10), actors::job_remove_atom::value,
                    int32_t{3})
        .receive([&](const std::string& e) { error = e; },
                 [&](const caf::error& e) { FAIL(caf::to_string(e)); });
      CHECK(error == "no device 3 in this job (it has 3)");
    } else if (ev["event"] == "fault" && ev["fault"] == "add_refused") {
      refused = ev;
    }
  }
  REQUIRE(last == "finished");
  auto r = actors::await_job(sys, sup);
  CHECK(r.steps == 20);
  REQUIRE(added.is_object());
  CHECK(added["devices"] == json::array({2}));
  CHECK(added["nodes"] == json::array({"node2"}));
  REQUIRE(refused.is_object());
  CHECK(refused["endpoint"] == cluster.endpoints()[0]);
  CHECK(refused["reason"] == "already one of the job's nodes");
  // Every step after the addition has a replica on node2, none before.
  auto on_node2 = [](const json& it) {
    for (auto& rep : it["replicas"])
      if (rep["replica"].get<std::string>().find("@node2") != std::string::npos)
        return true;
    return false;
  };
  REQUIRE(iterations.size() == 20);
  const auto at = added["step"].get<size_t>();
  CHECK(at >= 3);
  for (size_t i = 0; i < iterations.size(); ++i) {
    INFO("step " << i);
    CHECK(on_node2(iterations[i]) == (i >= at));
  }
  bool in_plan = false;
  for (auto& st : r.plan.stages)
    for (int d : st.devices)
      in_plan |= d == 2;
  CHECK(in_plan);
  auto diff = max_abs_diff(r.model, reference(job, *train));
  INFO("max abs diff " << diff);
  CHECK(diff < 1e-4);
}

TEST_CASE("the step driver's mailbox stays small over a job of seconds: no "
          "request leaves its timeout behind (mlp, 3 in-process devices)") {
  // CAF 0.17 delivers a timed request's timeout even after its answer came,
  // and the step driver's blocking receives skip it from then on: with one
  // timed request per step (the micro-batch release, 1 s), a job of 3 s
  // held a stale message for every step older than a second.
  auto train = synthetic(16 * 4000);
  auto job = two_stage_mlp(4000);
  in_process env{3};
  auto sup = spawn_for(env, job, train);
  caf::anon_send(sup, actors::job_start_atom::value);
  const auto started = std::chrono::steady_clock::now();
  auto result = actors::await_job(*env.sys, sup, [&] {
    return std::chrono::steady_clock::now() - started > std::chrono::seconds(3);
  });
  REQUIRE(result.stopped);
  REQUIRE(result.iterations.size() >= 20);
  // The job ran long enough for a timeout of 1 s to come after most steps.
  const auto& last = result.iterations.back();
  REQUIRE(last["t_s"].get<double>() >= 2.0);
  INFO("steps " << result.iterations.size());
  for (const auto& rec : result.iterations)
    CHECK(rec["supervisor_mailbox"].get<int64_t>() <= 8);
}
