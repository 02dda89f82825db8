// Inference pipelines on emulated devices (issue #23), measured side by side
// in one run: for 1, 2, ... nodes (local node processes, each with its own
// emulated slowdown), the pipeline EdgePipe's planner picks, its predicted
// samples/s next to what `run_serve` measured, and the measured speedup over
// the one-node pipeline. The planner's profile is taken once in this process
// on one thread, as the nodes compute, before any node starts. Each node
// count runs with the links measured before planning (measure_links, the
// default) and, unless `--links measured`, again with every link assumed
// 1 Gbit/s.
//
// Devices are given as slowdowns of this host's core, or as catalog types
// (`--types`): the fastest type listed gets `--fastest-slowdown` and every
// other type that times its catalog speed ratio, so the emulated devices keep
// the catalog's relative speeds (the catalog's figures are training epoch
// times; docs/planner.md, "Device catalog"). `--preset vit-large` is
// issue #23's benchmark: ViT-L/16 on 1, 2, 4, 8 and 16 emulated Jetsons.
#include "../command_lists.hpp"
#include "../median.hpp"
#include "asteroid/actors/node.hpp"
#include "asteroid/actors/serve.hpp"
#include "asteroid/actors/server.hpp"
#include "asteroid/planner/device_catalog.hpp"

#include <CLI/CLI.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <sstream>

using namespace asteroid;

namespace {

std::vector<double> parse_numbers(const std::string& text) {
  std::vector<double> out;
  for (const auto& item : bench::split_list(text))
    out.push_back(std::stod(item));
  return out;
}

/// Slowdowns that keep the catalog's speed ratios between `types`, the
/// fastest of them at `fastest_slowdown`.
std::vector<double> slowdowns_of_types(const std::vector<std::string>& types,
                                       double fastest_slowdown) {
  double fastest = 0;
  for (const auto& t : types)
    fastest = std::max(fastest, planner::device_type(t).speed);
  std::vector<double> out;
  for (const auto& t : types)
    out.push_back(fastest_slowdown * fastest / planner::device_type(t).speed);
  return out;
}

/// EdgePipe's reported speedup with 16 devices (ViT-Large), measured on its
/// own testbed: a reference, not something this run reproduces.
constexpr double edgepipe_vit_large_16 = 10.59;

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"Inference pipelines on emulated devices: predicted vs measured samples/s"};
  std::string model = "cnn";
  std::string model_options_text = "{}";
  std::string slowdowns = "4,4,8,8";
  std::string types;
  double fastest_slowdown = 8;
  std::string counts = "1,2,3,4";
  int64_t requests = 300;
  int64_t requests_per_node = 0;
  int64_t micro_batch = 8;
  double link_rate_mbps = 0;
  std::string links_modes = "measured,assumed";
  int base_port = 27690;
  int64_t request_timeout_ms = 60000;
  std::string log_dir;
  std::string preset;
  app.add_option("--preset", preset,
                 "vit-large: EdgePipe's model on 1-16 emulated Jetsons (" 
                 "every option below not given takes the preset's value; docs/benchmarks.md)")
    ->check(CLI::IsMember({"vit-large"}));
  app.add_option("--model", model, "Model of the zoo")->capture_default_str();
  app.add_option("--model-options", model_options_text,
                 "Model options as JSON, e.g. '{\"sub_layers\":true,\"image_size\":32}'")
    ->capture_default_str();
  auto* slowdowns_option =
    app.add_option("--slowdowns", slowdowns,
                   "Emulated slowdown of node 0, 1, ... (a run with N nodes uses the first N)")
      ->capture_default_str();
  app.add_option("--types", types,
                 "Catalog device type of node 0, 1, ... instead of --slowdowns (see "
                 "`asteroid devices`)")
    ->excludes(slowdowns_option);
  app.add_option("--fastest-slowdown", fastest_slowdown,
                 "With --types: the emulated slowdown of the fastest type listed; the others "
                 "keep the catalog's speed ratios to it")
    ->capture_default_str();
  app.add_option("--nodes", counts, "Node counts to run")->capture_default_str();
  app.add_option("--requests", requests, "Requests per run")->capture_default_str();
  app.add_option("--requests-per-node", requests_per_node,
                 "Requests per run = this x the run's nodes (0: --requests)")
    ->capture_default_str();
  app.add_option("--micro-batch", micro_batch, "Samples per request")->capture_default_str();
  app.add_option("--link-rate", link_rate_mbps,
                 "Pace every node's outgoing tensors to this many Mbit/s (0: loopback, unpaced)")
    ->capture_default_str();
  app.add_option("--links", links_modes,
                 "How the planner prices links, one run each: measured, assumed (1 Gbit/s)")
    ->capture_default_str();
  app.add_option("--base-port", base_port, "Node i listens on PORT+i")->capture_default_str();
  app.add_option("--request-timeout-ms", request_timeout_ms,
                 "A request not answered within this fails the run (a request waits behind every "
                 "other in flight on the slowest device)")
    ->check(CLI::PositiveNumber)
    ->capture_default_str();
  app.add_option("--log-dir", log_dir,
                 "Keep the nodes' logs here (one folder per run; default: removed)");
  CLI11_PARSE(app, argc, argv);
  if (preset == "vit-large") {
    // ViT-L/16 with EdgePipe's units (attention and MLP sub-layers) at
    // 32x32 images: 5 tokens instead of 224x224's 197, so that a forward
    // pass takes about 1.3 s on one core of the development machine
    // instead of 50 s. Devices repeat planner_bench --inference's mix (a
    // quarter Xavier NX, a quarter TX2, half Nano), the fastest slowed 8x:
    // 16 such devices keep about one of the host's two cores busy.
    auto given = [&](const char* name) { return app.count(name) > 0; };
    if (!given("--model"))
      model = "vit_large";
    if (!given("--model-options"))
      model_options_text = R"({"sub_layers": true, "image_size": 32})";
    if (!given("--types") && !given("--slowdowns")) {
      types.clear();
      for (int i = 0; i < 4; ++i)
        types += std::string(i ? "," : "") + "xavier-nx,jetson-tx2,jetson-nano,jetson-nano";
    }
    if (!given("--nodes"))
      counts = "1,2,4,8,16";
    if (!given("--requests-per-node") && !given("--requests"))
      requests_per_node = 3;
    if (!given("--micro-batch"))
      micro_batch = 1;
    if (!given("--link-rate"))
      link_rate_mbps = 1000;
    if (!given("--links"))
      links_modes = "measured";
    if (!given("--base-port"))
      base_port = 27800;
    // 17 requests of about 10 s each may wait behind each other at a Nano.
    if (!given("--request-timeout-ms"))
      request_timeout_ms = 600000;
  }
  nlohmann::json model_options;
  try {
    model_options = nlohmann::json::parse(model_options_text);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "serve_bench: --model-options is not JSON: %s\n", e.what());
    return 2;
  }
  std::vector<double> slow;
  std::vector<std::string> type_of_node;
  try {
    if (!types.empty()) {
      type_of_node = bench::split_list(types);
      slow = slowdowns_of_types(type_of_node, fastest_slowdown);
    } else {
      slow = parse_numbers(slowdowns);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "serve_bench: %s\n", e.what());
    return 2;
  }
  bool with_measured = false, with_assumed = false;
  for (const auto& m : bench::split_list(links_modes)) {
    if (m == "measured")
      with_measured = true;
    else if (m == "assumed")
      with_assumed = true;
    else {
      std::fprintf(stderr, "serve_bench: --links takes measured and/or assumed, not '%s'\n",
                   m.c_str());
      return 2;
    }
  }
  // This program computes nothing else: one thread, as the nodes.
  at::set_num_threads(1);
  // The planner's profile, once, before any node process starts on this
  // host (server.hpp says why), on one thread as the nodes compute.
  const auto profile = actors::profile_for_serving(model, model_options, micro_batch);
  std::printf("model %s %s, micro-batch %lld; nodes are local processes (one LibTorch "
              "thread each) emulating devices slowed down from this host's core:",
              model.c_str(), model_options.dump().c_str(), static_cast<long long>(micro_batch));
  for (size_t i = 0; i < slow.size(); ++i)
    std::printf(" %s%sx%.2f", type_of_node.empty() ? "" : type_of_node[i].c_str(),
                type_of_node.empty() ? "" : " ", slow[i]);
  char pacing[64] = "unpaced";
  if (link_rate_mbps > 0)
    std::snprintf(pacing, sizeof pacing, "every node's output paced to %g Mbit/s",
                  link_rate_mbps);
  std::printf("; links loopback, %s; 'links' says what the planner priced transfers with; "
              "'measured' is the rate from the first answer on (the full pipeline), "
              "'whole' over the whole stream; 'busy/pred' is the slowest stage's emulated "
              "compute per request over the planned bottleneck\n",
              pacing);
  std::printf("%-6s %-9s %-30s %-34s %10s %10s %10s %9s %9s %9s %9s %9s\n", "nodes",
              "requests", "links", "stages (node: layers)", "predicted", "measured", "whole",
              "meas/pred", "busy/pred", "speedup", "pred.spd", "EdgePipe");
  double one_measured = 0, one_predicted = 0;
  std::vector<double> errors;
  int failed = 0;
  for (double count : parse_numbers(counts))
    for (bool measure : {true, false}) {
      const int n = static_cast<int>(count);
      if ((measure && !with_measured) || (!measure && !with_assumed))
        continue;
      if (n == 1 && !measure && with_measured)
        continue; // one node: no links, the measured run says it all
      if (n < 1 || static_cast<size_t>(n) > slow.size()) {
        std::fprintf(stderr, "serve_bench: %d nodes but %zu devices given\n", n, slow.size());
        return 2;
      }
      actors::local_cluster::options o;
      o.exe = ASTEROID_CLI_PATH;
      o.nodes = n;
      o.base_port = static_cast<uint16_t>(base_port);
      o.slowdowns.assign(slow.begin(), slow.begin() + n);
      if (link_rate_mbps > 0)
        o.link_rates_mbps = {link_rate_mbps};
      if (!log_dir.empty()) {
        o.log_dir = log_dir + "/nodes" + std::to_string(n) + (measure ? "-measured" : "-assumed");
        std::filesystem::create_directories(o.log_dir);
        o.keep_logs = true;
      }
      actors::local_cluster cluster{o};
      actors::serve_spec spec;
      spec.model = model;
      spec.model_options = model_options;
      spec.nodes = cluster.endpoints();
      spec.micro_batch = micro_batch;
      spec.requests = requests_per_node > 0 ? requests_per_node * n : requests;
      spec.dataset = "synthetic";
      spec.planner = "edgepipe";
      spec.profile = profile;
      spec.measure_links = measure;
      spec.request_timeout_ms = request_timeout_ms;
      actors::serve_result r;
      try {
        r = actors::run_serve(spec);
      } catch (const std::exception& e) {
        // A failed run costs its row, not the bench.
        std::printf("%-6d %-9lld failed: %s\n", n, static_cast<long long>(spec.requests),
                    e.what());
        std::fflush(stdout);
        ++failed;
        continue;
      }
      const std::string links = n == 1 ? "none" : actors::describe_links(r.stats["links"]);
      std::string stages;
      for (const auto& st : r.plan.stages)
        stages += (stages.empty() ? "" : " ") + std::to_string(st.device) + ":"
                  + std::to_string(st.first_layer) + "-" + std::to_string(st.end_layer);
      if (n == 1) {
        one_measured = r.steady_samples_per_s;
        one_predicted = r.plan.samples_per_s;
      }
      // Where a gap comes from: the slowest stage's emulated device time
      // per request (busy_s) against the planned bottleneck. Near 1 with a
      // lower rate: time outside the stages' compute; above 1: the
      // stages' compute itself took longer than profiled.
      double slowest_busy = 0;
      for (const auto& st : r.stats.value("stages", nlohmann::json::array())) {
        const auto done = st.value("requests", int64_t{0});
        if (done > 0)
          slowest_busy = std::max(slowest_busy, st.value("busy_s", 0.0) / done);
      }
      const double busy_ratio =
        r.plan.bottleneck_s > 0 ? slowest_busy / r.plan.bottleneck_s : 0.0;
      const double ratio = r.plan.samples_per_s > 0
                             ? r.steady_samples_per_s / r.plan.samples_per_s
                             : 0.0;
      if (measure)
        errors.push_back(std::abs(ratio - 1.0));
      char edgepipe[16] = "-";
      if (n == 16 && model.rfind("vit_large", 0) == 0)
        std::snprintf(edgepipe, sizeof edgepipe, "%.2f", edgepipe_vit_large_16);
      std::printf("%-6d %-9lld %-30s %-34s %10.3f %10.3f %10.3f %9.3f %9.3f %9.2f %9.2f %9s\n",
                  n, static_cast<long long>(spec.requests), links.c_str(), stages.c_str(),
                  r.plan.samples_per_s, r.steady_samples_per_s, r.samples_per_s, ratio,
                  busy_ratio,
                  one_measured > 0 ? r.steady_samples_per_s / one_measured : 0.0,
                  one_predicted > 0 ? r.plan.samples_per_s / one_predicted : 0.0,
                  edgepipe);
      std::fflush(stdout);
    }
  if (!errors.empty())
    std::printf("|measured/predicted - 1| over the runs with measured links: median %.3f, "
                "worst %.3f (%zu runs)\n",
                bench::median(errors), *std::max_element(errors.begin(), errors.end()),
                errors.size());
  if (model.rfind("vit_large", 0) == 0)
    std::printf("EdgePipe reports a %.2fx speedup for ViT-Large with 16 devices, on its own "
                "testbed (not emulated here)\n",
                edgepipe_vit_large_16);
  return failed > 0 ? 1 : 0;
}
