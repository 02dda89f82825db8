// Mutated inputs (issue 21, item 6): job files, cluster files, serve files
// and data-plane frames. Each mutated input is either accepted or refused with
// an error that names its file (or is a wire_error, for frames); no other
// exception, no crash, no hang. Job files that parse are then run (three
// in-process devices, three steps) and cluster files that parse are planned:
// each runs or fails in the input's terms. Checkpoints are fuzzed with
// re-sealed checksums in tests/serialization/checkpoint_test.cpp (decoding)
// and tests/training/resume_test.cpp (resuming).
#include "asteroid/actors/data_plane.hpp"
#include "asteroid/actors/job.hpp"
#include "asteroid/actors/node.hpp"
#include "asteroid/actors/protocol.hpp"
#include "asteroid/actors/serve.hpp"
#include "asteroid/planner/analytic_profiles.hpp"
#include "asteroid/planner/json_io.hpp"
#include "asteroid/planner/plan_validation.hpp"
#include "asteroid/planner/planner.hpp"
#include "asteroid/serialization/wire_error.hpp"

#include "in_process.hpp"
#include "job_control.hpp"
#include "raw_socket.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <limits>
#include <map>
#include <random>

using namespace asteroid;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

/// Values that break assumptions: wrong types, extremes, empty things.
json odd_value(std::mt19937_64& rng) {
  static const std::vector<json> pool = {
    nullptr, true, false, 0, -1, 1, 2, 7, -7, 0.5, -0.5, 1e300, -1e300, 1e-300,
    std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min(),
    std::numeric_limits<uint64_t>::max(), "", "x", "1f1b", "-1", "1e300",
    "4GiB", "1e300GiB", json::array(), json::array({1, 2}), json::object(),
    json::object({{"x", 1}})};
  return pool[rng() % pool.size()];
}

/// Every value's place in `j` (object members and array elements, nested).
void places(json& j, std::vector<json*>& out) {
  out.push_back(&j);
  if (j.is_object())
    for (auto& [_, v] : j.items())
      places(v, out);
  else if (j.is_array())
    for (auto& v : j)
      places(v, out);
}

/// One random change: a value replaced, a member removed, or an unknown
/// member added, somewhere in the tree.
void mutate(json& doc, std::mt19937_64& rng) {
  std::vector<json*> all;
  places(doc, all);
  auto* at = all[rng() % all.size()];
  switch (rng() % 4) {
    case 0:
    case 1:
      if (at != &doc) {
        *at = odd_value(rng);
        return;
      }
      [[fallthrough]];
    case 2:
      if (at->is_object() && !at->empty()) {
        auto it = at->begin();
        std::advance(it, static_cast<long>(rng() % at->size()));
        at->erase(it.key());
        return;
      }
      [[fallthrough]];
    default:
      if (at->is_object())
        (*at)["fuzz_unknown"] = odd_value(rng);
      else if (at != &doc)
        *at = odd_value(rng);
  }
}

/// Runs `parse` on `rounds` mutations of `seed_doc`: each must be accepted
/// or refused with an error starting with `prefix`.
template <class Parse>
void fuzz_json(const json& seed_doc, const std::string& prefix, int rounds,
               uint64_t seed, Parse parse) {
  std::mt19937_64 rng(seed);
  int refused = 0;
  for (int i = 0; i < rounds; ++i) {
    auto doc = seed_doc;
    for (int k = 1 + static_cast<int>(rng() % 3); k > 0; --k)
      mutate(doc, rng);
    try {
      parse(doc);
    } catch (const std::exception& e) {
      std::string what = e.what();
      INFO("input: " << doc.dump());
      CHECK_THAT(what, Catch::StartsWith(prefix));
      CHECK(what.size() > prefix.size() + 3); // says more than where
      ++refused;
    }
  }
  INFO(refused << " of " << rounds << " refused");
  CHECK(refused > rounds / 4);
}

json valid_job() {
  return json::parse(R"({
    "model": "mlp", "model_options": {"num_classes": 10, "hidden_sizes": [32]}, "dataset": "synthetic-images",
    "synthetic_count": 256, "train_limit": 0, "batch_size": 16, "micro_batches": 2,
    "optimizer": "sgd", "lr": 0.05, "momentum": 0.9, "weight_decay": 0.0,
    "epochs": 1, "max_steps": 10, "seed": 3,
    "nodes": ["127.0.0.1:27000", "127.0.0.1:27001"],
    "plan": {"planner": "test", "batch_size": 16, "micro_batches": 2,
             "stages": [{"first_layer": 0, "end_layer": 2, "devices": [0], "shares": [8]},
                        {"first_layer": 2, "end_layer": 3, "devices": [1], "shares": [8]}]},
    "schedule": "1f1b", "credit_window": 0, "evaluate": false, "progress": 0,
    "connect_timeout_ms": 3000, "step_timeout_ms": 30000,
    "fault_tolerance": {"recovery": "replay", "heartbeat_ms": 100, "heartbeat_misses": 5},
    "faults": [{"step": 3, "node": 1, "action": "kill"}]
  })");
}

json valid_serve() {
  return json::parse(R"({
    "model": "bert_tiny", "model_options": {"seq_len": 16, "num_classes": 4},
    "checkpoint": "", "seed": 2, "nodes": ["127.0.0.1:27000", "127.0.0.1:27001"],
    "credentials": "", "planner": "straight", "profile": "", "measure_links": false,
    "plan": {"stages": [{"first_layer": 0, "end_layer": 2, "device": 0},
                        {"first_layer": 2, "end_layer": 5, "device": 1}]},
    "micro_batch": 4, "max_in_flight": 3, "activation_codec": "int8-channel",
    "compress_below_mbps": 300,
    "data_plane": true, "dataset": "synthetic", "data_dir": "", "requests": 20,
    "metrics": "", "trace": "", "outputs": "", "connect_timeout_ms": 3000,
    "request_timeout_ms": 60000, "recover": true, "heartbeat_ms": 200,
    "heartbeat_misses": 5
  })");
}

} // namespace

TEST_CASE("mutated serve files are accepted or refused naming the file") {
  auto seed_doc = valid_serve();
  REQUIRE_NOTHROW(actors::parse_serve(seed_doc, "serve file fuzz.json"));
  fuzz_json(seed_doc, "serve file fuzz.json: ", 3000, 23,
            [](const json& j) { actors::parse_serve(j, "serve file fuzz.json"); });
}

TEST_CASE("mutated job files are accepted or refused naming the file") {
  auto seed_doc = valid_job();
  REQUIRE_NOTHROW(actors::parse_job(seed_doc, "job file fuzz.json"));
  fuzz_json(seed_doc, "job file fuzz.json: ", 3000, 21,
            [](const json& j) { actors::parse_job(j, "job file fuzz.json"); });
}

TEST_CASE("mutated job files that parse run on in-process devices or fail "
          "saying why: no crash, no hang") {
  auto seed_doc = valid_job();
  seed_doc.erase("faults"); // a kill needs node processes
  seed_doc["max_steps"] = 3;
  // A plan that fits the model (mlp, one hidden layer: two layers), with a
  // group of two, so that mutations reach the all-reduce too.
  seed_doc["plan"]["stages"] = json::parse(R"([
    {"first_layer": 0, "end_layer": 1, "devices": [0, 1], "shares": [5, 3]},
    {"first_layer": 1, "end_layer": 2, "devices": [2], "shares": [8]}])");
  std::mt19937_64 rng(24);
  int refused = 0, ran = 0, failed = 0;
  std::map<std::string, int> failures; // the first words of each error
  const auto t0 = std::chrono::steady_clock::now();
  const int rounds = 1000;
  for (int i = 0; i < rounds; ++i) {
    auto doc = seed_doc;
    mutate(doc, rng);
    actors::job_spec job;
    try {
      job = actors::parse_job(doc, "job file fuzz.json");
    } catch (const std::exception&) {
      ++refused; // the parser's errors are the test above's
      continue;
    }
    // What this test decides, not the file: a short run, written nowhere,
    // bounded in time.
    if (job.max_steps < 0 || job.max_steps > 3)
      job.max_steps = 3;
    job.progress = 0;
    job.metrics_path.clear();
    job.trace_path.clear();
    job.fault_tolerance.checkpoint_path.clear();
    job.step_timeout_ms = std::min<int64_t>(job.step_timeout_ms, 10000);
    job.connect_timeout_ms = std::min<int64_t>(job.connect_timeout_ms, 3000);
    job.nodes.clear(); // in-process devices have no endpoints
    INFO("input: " << doc.dump());
    // Fresh devices each time: what one job left on them is not this test's.
    test::in_process env{3};
    try {
      actors::detail::job_inputs in;
      in.job = job;
      actors::detail::load_job_data_and_model(in);
      auto r = actors::run_job(*env.sys, in.job, env.devices, std::move(in.model), in.train,
                               in.test);
      CHECK(r.steps <= 3);
      ++ran;
    } catch (const std::exception& e) {
      std::string what = e.what();
      INFO("error: " << what);
      CHECK(what.size() > 10);
      // Said in the job's terms, not a library's internals.
      CHECK(what.find("json.exception") == std::string::npos);
      CHECK(what.find("Exception raised from") == std::string::npos);
      // A value the parser let through is caught before a node uses it:
      // no replica (named "s<stage>r<replica>@<device>") fails on it.
      CHECK(what.find("@dev") == std::string::npos);
      ++failed;
      ++failures[what.substr(0, 60)];
    }
  }
  const auto s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("[job fuzz] %d mutated jobs: %d refused by the parser, %d ran, %d failed "
              "saying why (%.1f s)\n", rounds, refused, ran, failed, s);
  for (auto& [what, n] : failures)
    std::printf("  %3d x %s\n", n, what.c_str());
  CHECK(ran > rounds / 20);
}

TEST_CASE("mutated cluster files are accepted or refused naming the file") {
  std::vector<planner::device_spec> devices{
    {"nano", "jetson-nano", 1.0, int64_t{4} << 30, "127.0.0.1:27000"},
    {"tx2", "jetson-tx2", 1.5, int64_t{8} << 30, "127.0.0.1:27001"},
    {"nx", "jetson-nx", 2.0, int64_t{8} << 30, "127.0.0.1:27002"}};
  json seed_doc = planner::cluster::uniform("fuzz", devices, 12.5e6);
  REQUIRE_NOTHROW(planner::parse_cluster(seed_doc, "cluster fuzz.json"));
  fuzz_json(seed_doc, "cluster fuzz.json: ", 3000, 22,
            [](const json& j) { planner::parse_cluster(j, "cluster fuzz.json"); });
}

TEST_CASE("mutated cluster files that parse are planned, or the planner says "
          "why it cannot") {
  std::vector<planner::device_spec> devices{
    {"nano", "jetson-nano", 1.0, int64_t{4} << 30, "127.0.0.1:27000"},
    {"tx2", "jetson-tx2", 1.5, int64_t{8} << 30, "127.0.0.1:27001"},
    {"nx", "jetson-nx", 2.0, int64_t{8} << 30, "127.0.0.1:27002"}};
  json seed_doc = planner::cluster::uniform("fuzz", devices, 12.5e6);
  const auto profile = planner::analytic_profile("mobilenetv2");
  auto asteroid = planner::make_planner("asteroid");
  std::mt19937_64 rng(25);
  int refused = 0, planned = 0, failed = 0;
  const int rounds = 300;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < rounds; ++i) {
    auto doc = seed_doc;
    mutate(doc, rng);
    planner::cluster c;
    try {
      c = planner::parse_cluster(doc, "cluster fuzz.json");
    } catch (const std::exception&) {
      ++refused;
      continue;
    }
    INFO("input: " << doc.dump());
    try {
      auto p = asteroid->make_plan(profile, c, 32);
      CHECK_NOTHROW(planner::validate(p, static_cast<int>(profile.layers.size()), c));
      CHECK(p.predicted_samples_per_s > 0);
      ++planned;
    } catch (const std::exception& e) {
      std::string what = e.what();
      INFO("error: " << what);
      CHECK(what.size() > 10);
      CHECK(what.find("json.exception") == std::string::npos);
      ++failed;
    }
  }
  const auto s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("[cluster fuzz] %d mutated clusters: %d refused by the parser, %d planned, "
              "%d not plannable, saying why (%.1f s)\n", rounds, refused, planned, failed, s);
  CHECK(planned > rounds / 10);
}

TEST_CASE("mutated frames: headers decode or name their problem, and a data "
          "plane fed them keeps serving") {
  serialization::tensor_message m;
  m.kind = serialization::tensor_kind::activation;
  m.job = 0;
  m.step = 4;
  m.key = "L0-2";
  m.payload = std::string(300, 'p');
  auto good = serialization::encode_frame_header(serialization::frame_header_of(m, 1));
  std::mt19937_64 rng(23);
  int refused = 0;
  for (int i = 0; i < 5000; ++i) {
    auto bytes = good;
    for (int k = 1 + static_cast<int>(rng() % 4); k > 0; --k)
      bytes[rng() % bytes.size()] = static_cast<char>(rng());
    try {
      serialization::decode_frame_header(bytes.data());
    } catch (const serialization::wire_error& e) {
      CHECK(std::string(e.what()).size() > 5);
      ++refused;
    }
  }
  CHECK(refused > 1000);

  // A live plane: 200 connections, each a mutated header and some bytes,
  // then closed. Payloads are capped at 1 MiB here, so that a header that
  // decodes with a large size costs the plane little.
  caf::actor_system_config cfg;
  actors::configure(cfg);
  caf::actor_system sys{cfg};
  caf::scoped_actor sink{sys};
  auto me = caf::actor_cast<caf::actor>(sink);
  actors::data_plane::options small;
  small.limits.max_payload = 1 << 20;
  auto plane = actors::data_plane::start(small);
  plane->add_sink(me);
  for (int i = 0; i < 200; ++i) {
    auto bytes = good;
    for (int k = 1 + static_cast<int>(rng() % 4); k > 0; --k)
      bytes[rng() % bytes.size()] = static_cast<char>(rng());
    std::string wire(bytes.begin(), bytes.end());
    wire += std::string(rng() % 1024, 'z');
    test::send_and_close(plane->port(), wire);
  }
  auto sender = actors::data_plane::start({});
  REQUIRE(sender->send("127.0.0.1:" + std::to_string(plane->port()), me.id(), m));
  // A mutated frame may name this actor too; wait for the real one.
  bool got = false;
  for (int i = 0; i < 300 && !got; ++i)
    sink->receive([&](actors::tensor_atom, serialization::tensor_message& r) {
                    got = r.step == 4 && r.payload == m.payload;
                  },
                  caf::after(10s) >> [&] { i = 300; });
  CHECK(got);
  sender->stop();
  plane->stop();
}
