#include <catch2/catch.hpp>

#include <fstream>
#include <string>

#include "asteroid/planner/error.hpp"
#include "asteroid/planner/json_io.hpp"
#include "test_helpers.hpp"

using namespace asteroid::planner;
using nlohmann::json;

namespace {

std::string tmp_path(const std::string& name) {
  return std::string(ASTEROID_TEST_TMP) + "/planner_json_" + name;
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

// The message of the planner_error thrown by f (fails if none is thrown).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const planner_error& e) {
    return e.what();
  }
  FAIL("no planner_error thrown");
  return {};
}

json good_cluster() {
  return json::parse(R"({
    "name": "lab",
    "devices": [
      {"name": "a", "type": "jetson-nano", "endpoint": "10.0.0.1:7000"},
      {"name": "b", "type": "jetson-tx2", "memory": "6GiB"},
      {"name": "c", "speed": 1.5, "memory": 2000000000}
    ],
    "link_mbps": 100,
    "latency_ms": 0.5
  })");
}

} // namespace

TEST_CASE("memory sizes parse with binary and decimal units", "[planner][json]") {
  CHECK(parse_memory_size(json("4GiB"), "x") == 4LL << 30);
  CHECK(parse_memory_size(json("8GB"), "x") == 8'000'000'000LL);
  CHECK(parse_memory_size(json("512 MiB"), "x") == 512LL << 20);
  CHECK(parse_memory_size(json("1.5G"), "x") == 3LL << 29);
  CHECK(parse_memory_size(json(12345), "x") == 12345);
  CHECK(parse_memory_size(json("100"), "x") == 100);
  CHECK_THROWS_WITH(parse_memory_size(json("4 parsecs"), "cfg"),
                    Catch::Contains("cfg: expected a number like \"4GiB\" or bytes") &&
                      Catch::Contains("unknown unit \"parsecs\""));
  CHECK_THROWS_AS(parse_memory_size(json(-5), "x"), planner_error);
  // Sizes past 2^63 bytes used to wrap to a negative budget.
  CHECK_THROWS_WITH(parse_memory_size(json(1e300), "x"), Catch::Contains("too large"));
  CHECK_THROWS_WITH(parse_memory_size(json("1e300"), "x"), Catch::Contains("expected a number"));
  CHECK_THROWS_WITH(parse_memory_size(json("99999999999 TiB"), "--memory"),
                    Catch::Contains("--memory: \"99999999999 TiB\" is too large"));
  CHECK(parse_memory_size(json("8388607 TiB"), "x") == 8388607LL << 40);
  CHECK_THROWS_AS(parse_memory_size(json(true), "x"), planner_error);
}

TEST_CASE("cluster JSON: catalog types, explicit speed, uniform links", "[planner][json]") {
  auto c = parse_cluster(good_cluster(), "lab.json");
  REQUIRE(c.size() == 3);
  CHECK(c.name == "lab");
  CHECK(c.devices[0].speed == 1.0);
  CHECK(c.devices[0].memory_bytes == 3LL << 30); // catalog default budget
  CHECK(c.devices[0].endpoint == "10.0.0.1:7000");
  CHECK(c.devices[1].speed == Approx(2.484).epsilon(1e-3));
  CHECK(c.devices[1].memory_bytes == 6LL << 30);
  CHECK(c.devices[2].type == "custom");
  CHECK(c.devices[2].speed == 1.5);
  CHECK(c.bandwidth(0, 2) == Approx(100e6 / 8));
  CHECK(c.latency(2, 1) == Approx(0.5e-3));
  CHECK(c.bandwidth(1, 1) == 0.0);
}

TEST_CASE("cluster JSON: bandwidth and latency matrices", "[planner][json]") {
  auto j = json::parse(R"({
    "devices": [{"name": "a", "speed": 1, "memory": "1GiB"},
                {"name": "b", "speed": 2, "memory": "1GiB"}],
    "bandwidth_mbps": [[0, 100], [50, 0]],
    "latency_ms": [[0, 1], [2, 0]]
  })");
  auto c = parse_cluster(j, "m.json");
  CHECK(c.bandwidth(0, 1) == Approx(100e6 / 8));
  CHECK(c.bandwidth(1, 0) == Approx(50e6 / 8));
  CHECK(c.latency(0, 1) == Approx(1e-3));
  CHECK(c.latency(1, 0) == Approx(2e-3));
}

TEST_CASE("cluster JSON errors name the file and the field", "[planner][json]") {
  auto path = tmp_path("bad_cluster.json");
  auto j = good_cluster();
  j["devices"][2]["memory"] = "lots";
  write_file(path, j.dump());
  auto msg = error_of([&] { load_cluster_file(path); });
  CHECK_THAT(msg, Catch::StartsWith(path + ": devices[2].memory: expected a number like "
                                           "\"4GiB\" or bytes"));

  j = good_cluster();
  j["devices"][1]["type"] = "iphone";
  CHECK_THAT(error_of([&] { parse_cluster(j, "c.json"); }),
             Catch::Contains("c.json: devices[1].type: unknown device type \"iphone\"") &&
               Catch::Contains("jetson-nano"));

  j = good_cluster();
  j.erase("link_mbps");
  CHECK_THAT(error_of([&] { parse_cluster(j, "c.json"); }),
             Catch::Contains("c.json: link_mbps: missing"));

  j = good_cluster();
  j["bandwidth_mbps"] = json::array({json::array({0, 1})});
  CHECK_THAT(error_of([&] { parse_cluster(j, "c.json"); }),
             Catch::Contains("not both"));
  j.erase("link_mbps");
  CHECK_THAT(error_of([&] { parse_cluster(j, "c.json"); }),
             Catch::Contains("c.json: bandwidth_mbps: expected 3 rows (one per device), got 1"));

  j = good_cluster();
  j["devices"][0]["memroy"] = "1GiB";
  CHECK_THAT(error_of([&] { parse_cluster(j, "c.json"); }),
             Catch::Contains("c.json: devices[0].memroy: unknown field"));

  j = good_cluster();
  j["devices"][2].erase("memory");
  CHECK_THAT(error_of([&] { parse_cluster(j, "c.json"); }),
             Catch::Contains("c.json: devices[2].memory: missing"));

  j = good_cluster();
  j["devices"][2]["name"] = "a";
  CHECK_THAT(error_of([&] { parse_cluster(j, "c.json"); }),
             Catch::Contains("devices[2].name: duplicate device name \"a\""));

  j = good_cluster();
  j["link_mbps"] = -3;
  CHECK_THAT(error_of([&] { parse_cluster(j, "c.json"); }),
             Catch::Contains("c.json: link_mbps: expected a positive number"));

  write_file(path, "{\"devices\": [");
  CHECK_THAT(error_of([&] { load_cluster_file(path); }),
             Catch::StartsWith(path + ": invalid JSON"));
  CHECK_THAT(error_of([&] { load_cluster_file(tmp_path("does_not_exist.json")); }),
             Catch::Contains("cannot open file"));
}

TEST_CASE("cluster JSON round trip (uniform and matrix links)", "[planner][json]") {
  auto c = parse_cluster(good_cluster(), "lab.json");
  auto path = tmp_path("cluster_rt.json");
  save_cluster_file(c, path);
  auto back = load_cluster_file(path);
  REQUIRE(back.size() == c.size());
  for (int d = 0; d < c.size(); ++d) {
    CHECK(back.devices[d].name == c.devices[d].name);
    CHECK(back.devices[d].type == c.devices[d].type);
    CHECK(back.devices[d].speed == Approx(c.devices[d].speed));
    CHECK(back.devices[d].memory_bytes == c.devices[d].memory_bytes);
    CHECK(back.devices[d].endpoint == c.devices[d].endpoint);
    for (int e = 0; e < c.size(); ++e) {
      CHECK(back.bandwidth(d, e) == Approx(c.bandwidth(d, e)));
      CHECK(back.latency(d, e) == Approx(c.latency(d, e)));
    }
  }
  c.bandwidth_Bps[0][1] = 1e6;
  c.latency_s[2][0] = 0.01;
  auto j = json(c);
  CHECK(j.contains("bandwidth_mbps"));
  CHECK(j["latency_ms"].is_array());
  auto back2 = parse_cluster(j, "rt");
  CHECK(back2.bandwidth(0, 1) == Approx(1e6));
  CHECK(back2.bandwidth(1, 0) == Approx(100e6 / 8));
  CHECK(back2.latency(2, 0) == Approx(0.01));
  // Links are half duplex unless the file says otherwise.
  CHECK_FALSE(back2.full_duplex_links);
  CHECK_FALSE(j.contains("full_duplex_links"));
  c.full_duplex_links = true;
  j = json(c);
  CHECK(j.value("full_duplex_links", false));
  CHECK(parse_cluster(j, "rt").full_duplex_links);
  j["full_duplex_links"] = "yes";
  CHECK_THAT(error_of([&] { parse_cluster(j, "c.json"); }),
             Catch::Contains("c.json: full_duplex_links"));
}

TEST_CASE("model profile JSON round trip and errors", "[planner][json]") {
  model_profile p;
  p.model = "tiny";
  p.device = "jetson-nano";
  p.input_bytes_per_sample = 3072;
  p.layers.push_back(test::linear_layer("conv", 1e-3, 2e-3, 4096, 1000));
  p.layers.push_back(test::linear_layer("fc", 2e-4, 4e-4, 40, 200));
  p.layers[1].working_bytes_per_sample = 77;
  p.layers[1].stashed_bytes_per_sample = 99;
  p.layers[1].optimizer_step_s = 2.5e-4;
  auto path = tmp_path("profile_rt.json");
  save_model_profile_file(p, path);
  auto q = load_model_profile_file(path);
  CHECK(q.model == "tiny");
  CHECK(q.device == "jetson-nano");
  CHECK(q.input_bytes_per_sample == 3072);
  REQUIRE(q.num_layers() == 2);
  CHECK(q.layers[0].name == "conv");
  CHECK(q.layers[0].batch_sizes == p.layers[0].batch_sizes);
  CHECK(q.layers[0].forward_s == p.layers[0].forward_s);
  CHECK(q.layers[1].backward_s == p.layers[1].backward_s);
  CHECK(q.layers[1].working_bytes_per_sample == 77);
  CHECK(q.layers[1].stashed_bytes_per_sample == 99);
  CHECK(q.layers[1].optimizer_state_bytes == 200);
  CHECK(q.layers[1].optimizer_step_s == 2.5e-4);
  // An unmeasured (0) update time is left out, and reads back as 0.
  CHECK_FALSE(json(p)["layers"][0].contains("optimizer_step_s"));
  CHECK(q.layers[0].optimizer_step_s == 0.0);

  auto j = json(p);
  j["layers"][1]["forward_s"] = json::array({1.0});
  CHECK_THAT(error_of([&] { parse_model_profile(j, "p.json"); }),
             Catch::Contains("p.json: layers[1].forward_s: expected 2 times (one per batch "
                             "size), got 1"));
  j = json(p);
  j["layers"][0]["batch_sizes"] = json::array({4, 2});
  CHECK_THAT(error_of([&] { parse_model_profile(j, "p.json"); }),
             Catch::Contains("p.json: layers[0].batch_sizes[1]: batch sizes must be strictly "
                             "ascending"));
  j = json(p);
  j["layers"][0].erase("param_bytes");
  CHECK_THAT(error_of([&] { parse_model_profile(j, "p.json"); }),
             Catch::Contains("p.json: layers[0].param_bytes: missing"));
  j = json(p);
  j["layers"][1]["output_bytes_per_sample"] = -1;
  CHECK_THAT(error_of([&] { parse_model_profile(j, "p.json"); }),
             Catch::Contains("layers[1].output_bytes_per_sample: expected a non-negative"));
  j = json(p);
  j["layers"][1]["optimizer_step_s"] = -0.5;
  CHECK_THAT(error_of([&] { parse_model_profile(j, "p.json"); }),
             Catch::Contains("p.json: layers[1].optimizer_step_s: expected a non-negative"));
  j = json(p);
  j["layers"][0]["optimizer_step_s"] = "fast";
  CHECK_THAT(error_of([&] { parse_model_profile(j, "p.json"); }),
             Catch::Contains("p.json: layers[0].optimizer_step_s"));
  // The nlohmann hook works too.
  j = json(p);
  CHECK(j.at("layers").at(0).get<layer_profile>().name == "conv");
}

TEST_CASE("plan JSON round trip", "[planner][json]") {
  plan p;
  p.planner = "asteroid";
  p.batch_size = 32;
  p.micro_batches = 4;
  p.stages.push_back({0, 3, {2, 0}, {5, 3}});
  p.stages.push_back({3, 5, {1}, {8}});
  p.predicted_round_s = 1.25;
  p.predicted_samples_per_s = 25.6;
  p.simulated_round_s = 1.5;
  p.simulated_samples_per_s = 21.3;
  p.predicted_memory_bytes = {10, 20, 30};
  auto path = tmp_path("plan_rt.json");
  save_plan_file(p, path);
  auto q = load_plan_file(path);
  CHECK(q.planner == "asteroid");
  CHECK(q.batch_size == 32);
  CHECK(q.micro_batches == 4);
  REQUIRE(q.num_stages() == 2);
  CHECK(q.stages[0].devices == std::vector<int>{2, 0});
  CHECK(q.stages[0].shares == std::vector<int64_t>{5, 3});
  CHECK(q.stages[1].first_layer == 3);
  CHECK(q.stages[1].end_layer == 5);
  CHECK(q.predicted_round_s == 1.25);
  CHECK(q.simulated_round_s == 1.5);
  CHECK(q.simulated_samples_per_s == 21.3);
  CHECK(q.predicted_memory_bytes == p.predicted_memory_bytes);
  {
    // A plan written before the simulated prediction existed still loads.
    auto old = json(p);
    old["predicted"].erase("simulated_round_s");
    old["predicted"].erase("simulated_samples_per_s");
    auto o = parse_plan(old, "old-plan.json");
    CHECK(o.simulated_round_s == 0);
    CHECK(o.predicted_round_s == 1.25);
    old["predicted"]["simulated_round_s"] = -1;
    CHECK_THAT(error_of([&] { parse_plan(old, "plan.json"); }),
               Catch::Contains("plan.json: predicted.simulated_round_s"));
  }

  auto j = json(p);
  j["stages"][1]["shares"] = json::array({8, 1});
  CHECK_THAT(error_of([&] { parse_plan(j, "plan.json"); }),
             Catch::Contains("plan.json: stages[1].shares: expected 1 shares (one per device), "
                             "got 2"));
  j = json(p);
  j["micro_batches"] = 0;
  CHECK_THAT(error_of([&] { parse_plan(j, "plan.json"); }),
             Catch::Contains("plan.json: micro_batches: expected an integer in [1, 2147483647], "
                             "got 0"));
  // Beyond what an int holds: refused, not wrapped (2^32 + 2 read as 2).
  j["micro_batches"] = int64_t{4294967298};
  CHECK_THAT(error_of([&] { parse_plan(j, "plan.json"); }),
             Catch::Contains("plan.json: micro_batches: expected an integer in [1, 2147483647], "
                             "got 4294967298"));
  j = json(p);
  j["stages"][0]["devices"][0] = int64_t{4294967296};
  CHECK_THAT(error_of([&] { parse_plan(j, "plan.json"); }),
             Catch::Contains("plan.json: stages[0].devices[0]: expected an integer in "
                             "[0, 2147483647], got 4294967296"));
  j = json(p);
  j["stages"][0]["end_layer"] = -1;
  CHECK_THAT(error_of([&] { parse_plan(j, "plan.json"); }),
             Catch::Contains("plan.json: stages[0].end_layer: expected an integer in "));
}

TEST_CASE("the paper's environments load from examples/clusters", "[planner][json]") {
  struct env {
    const char* key;
    int nano, tx2, nx;
  };
  const env envs[] = {{"a", 5, 0, 0}, {"b", 0, 2, 3}, {"c", 3, 2, 1}, {"d", 3, 1, 0}};
  for (const auto& e : envs)
    for (int mbps : {100, 1000}) {
      std::string name = std::string("env-") + e.key + "-" + std::to_string(mbps) + "mbps";
      auto c = load_cluster_file(std::string(ASTEROID_SOURCE_DIR) + "/examples/clusters/" +
                                 name + ".json");
      INFO(name);
      CHECK(c.name == name);
      int nano = 0, tx2 = 0, nx = 0;
      for (const auto& d : c.devices) {
        nano += d.type == "jetson-nano";
        tx2 += d.type == "jetson-tx2";
        nx += d.type == "xavier-nx";
        CHECK(d.memory_bytes == (d.type == "jetson-nano" ? 3LL << 30 : 7LL << 30));
      }
      CHECK(nano == e.nano);
      CHECK(tx2 == e.tx2);
      CHECK(nx == e.nx);
      CHECK(c.bandwidth(0, c.size() - 1) == Approx(mbps * 1e6 / 8));
    }
}
