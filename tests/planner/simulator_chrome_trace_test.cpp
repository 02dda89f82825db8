#include "asteroid/planner/chrome_trace.hpp"
#include "asteroid/planner/schedule.hpp"
#include "asteroid/planner/simulator.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

using namespace asteroid::planner;
using nlohmann::json;

namespace {

// Two stages: s0 on devices 0 and 1 (F 1 s / 2 s, B 1 s), s1 on device 2
// (F = B = 1 s), 0.5 s link each way, one micro-batch, 0.25 s all-reduce.
simulation_result small_round() {
  pipeline_steps ps;
  ps.micro_batches = 1;
  pipeline_step s0;
  s0.stage = 0;
  s0.devices = {0, 1};
  s0.device_forward_s = {1, 2};
  s0.device_backward_s = {1, 1};
  s0.forward_s = 2;
  s0.backward_s = 1;
  s0.allreduce_s = 0.25;
  pipeline_step link;
  link.type = pipeline_step::kind::communication;
  link.forward_s = link.backward_s = 0.5;
  pipeline_step s1;
  s1.stage = 1;
  s1.devices = {2};
  s1.device_forward_s = s1.device_backward_s = {1};
  s1.forward_s = s1.backward_s = 1;
  ps.steps = {s0, link, s1};
  plan p;
  p.micro_batches = 1;
  p.batch_size = 4;
  p.stages = {{0, 1, {0, 1}, {3, 1}}, {1, 2, {2}, {4}}};
  return simulate(p, ps, schedule_kind::one_f_one_b);
}

const json* find_event(const json& trace, const std::string& name, int pid) {
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "X" && e["name"] == name && e["pid"] == pid)
      return &e;
  return nullptr;
}

} // namespace

TEST_CASE("chrome trace of a simulated round parses and holds its events") {
  auto trace = trace_from_simulation(small_round(), {"nano-0", "nano-1"});
  std::ostringstream out;
  write_chrome_trace(trace, out);
  json parsed = json::parse(out.str());
  REQUIRE(parsed.contains("traceEvents"));

  int complete = 0;
  for (const auto& e : parsed["traceEvents"])
    if (e["ph"] == "X")
      ++complete;
  // Devices: s0r0 F B AR, s0r1 F B AR, s1r0 F B (loads and steps take 0 s);
  // link: one activation, one gradient.
  CHECK(complete == 10);

  const json* fwd = find_event(parsed, "FWD mb=0", 1);
  REQUIRE(fwd);
  CHECK((*fwd)["ts"].get<double>() == Approx(0.0));
  CHECK((*fwd)["dur"].get<double>() == Approx(2e6));
  CHECK((*fwd)["tid"] == 1); // 100 * stage 0 + replica 1
  CHECK((*fwd)["cat"] == "compute");
  CHECK((*fwd)["args"]["replica"] == 1);
  CHECK((*fwd)["args"]["micro_batch"] == 0);

  // Links come after the devices: pid 3 is the s0-s1 boundary.
  const json* act = find_event(parsed, "ACT mb=0", 3);
  REQUIRE(act);
  CHECK((*act)["ts"].get<double>() == Approx(2e6));
  CHECK((*act)["dur"].get<double>() == Approx(0.5e6));
  CHECK((*act)["tid"] == 0);
  const json* grad = find_event(parsed, "GRAD mb=0", 3);
  REQUIRE(grad);
  CHECK((*grad)["tid"] == 1);
  CHECK((*grad)["ts"].get<double>() == Approx(4.5e6));

  const json* ar = find_event(parsed, "ALLREDUCE", 0);
  REQUIRE(ar);
  CHECK((*ar)["ts"].get<double>() == Approx(6e6));
  CHECK((*ar)["cat"] == "allreduce");

  std::map<std::pair<int, int>, std::string> names;
  for (const auto& e : parsed["traceEvents"])
    if (e["ph"] == "M")
      names[{e["pid"].get<int>(), e["name"] == "thread_name" ? e["tid"].get<int>() : -1}] =
          e["args"]["name"].get<std::string>();
  CHECK(names[{0, -1}] == "nano-0");
  CHECK(names[{2, -1}] == "device 2");
  CHECK(names[{2, 100}] == "s1r0");
  CHECK(names[{3, -1}] == "link s0-s1");
  CHECK(names[{3, 1}] == "gradients s1->s0");
}

TEST_CASE("generic trace events keep their args and go to a file") {
  chrome_trace trace;
  trace.process_names[7] = "runtime";
  trace.events.push_back({"FWD mb=3", "compute", 10.0, 2.5, 7, 1,
                          {{"micro_batch", int64_t{3}},
                           {"loss", 0.5},
                           {"device", std::string("xavier-nx")}}});
  std::string path = std::string(ASTEROID_TEST_TMP) + "/trace_test.json";
  write_chrome_trace(trace, path);
  std::ifstream in(path);
  json parsed = json::parse(in);
  const json* e = find_event(parsed, "FWD mb=3", 7);
  REQUIRE(e);
  CHECK((*e)["args"]["micro_batch"] == 3);
  CHECK((*e)["args"]["loss"].get<double>() == Approx(0.5));
  CHECK((*e)["args"]["device"] == "xavier-nx");
  CHECK((*e)["dur"].get<double>() == Approx(2.5));
  CHECK(parsed["displayTimeUnit"] == "ms");

  REQUIRE_THROWS_WITH(write_chrome_trace(trace, "/nonexistent-dir/t.json"),
                      Catch::Contains("'/nonexistent-dir/t.json'"));
}
