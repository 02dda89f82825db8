// Inference pipelines on emulated devices (issue #23), measured side by side
// in one run: for 1, 2, ... nodes (local node processes, each with its own
// emulated slowdown), the pipeline EdgePipe's planner picks, its predicted
// samples/s next to what `run_serve` measured, and the measured speedup over
// the one-node pipeline. The planner's profile is taken once in this process
// on one thread, as the nodes compute, before any node starts. Each node
// count runs twice, side by side: with the links measured before planning
// (measure_links, the default) and with every link assumed 1 Gbit/s.
#include "asteroid/actors/node.hpp"
#include "asteroid/actors/serve.hpp"
#include "asteroid/actors/server.hpp"

#include <CLI/CLI.hpp>
#include <torch/torch.h>

#include <cstdio>
#include <sstream>

using namespace asteroid;

namespace {

std::vector<double> parse_numbers(const std::string& text) {
  std::vector<double> out;
  std::stringstream in{text};
  std::string item;
  while (std::getline(in, item, ','))
    out.push_back(std::stod(item));
  return out;
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"Inference pipelines on emulated devices: predicted vs measured samples/s"};
  std::string model = "cnn";
  std::string slowdowns = "4,4,8,8";
  std::string counts = "1,2,3,4";
  int64_t requests = 300;
  int64_t micro_batch = 8;
  int base_port = 27690;
  app.add_option("--model", model, "Model of the zoo")->capture_default_str();
  app.add_option("--slowdowns", slowdowns,
                 "Emulated slowdown of node 0, 1, ... (a run with N nodes uses the first N)")
    ->capture_default_str();
  app.add_option("--nodes", counts, "Node counts to run")->capture_default_str();
  app.add_option("--requests", requests, "Requests per run")->capture_default_str();
  app.add_option("--micro-batch", micro_batch, "Samples per request")->capture_default_str();
  app.add_option("--base-port", base_port, "Node i listens on PORT+i")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  // This program computes nothing else: one thread, as the nodes.
  at::set_num_threads(1);
  // The planner's profile, once, before any node process starts on this
  // host (server.hpp says why), on one thread as the nodes compute.
  const auto profile = actors::profile_for_serving(model, nlohmann::json::object(),
                                                   micro_batch);
  const auto slow = parse_numbers(slowdowns);
  std::printf("model %s, %lld requests of %lld samples; nodes are local processes with "
              "emulated slowdowns %s (one LibTorch thread each), links loopback; "
              "'links' says what the planner priced transfers with\n",
              model.c_str(), static_cast<long long>(requests),
              static_cast<long long>(micro_batch), slowdowns.c_str());
  std::printf("%-6s %-30s %-28s %12s %12s %9s %10s %10s\n", "nodes", "links",
              "stages (node: layers)", "predicted", "measured", "meas/pred", "speedup",
              "pred. spd");
  double one_measured = 0, one_predicted = 0;
  for (double count : parse_numbers(counts))
    for (bool measure : {true, false}) {
      const int n = static_cast<int>(count);
      if (n == 1 && !measure)
        continue; // one node: no links
      if (n < 1 || static_cast<size_t>(n) > slow.size()) {
        std::fprintf(stderr, "serve_bench: %d nodes but %zu slowdowns\n", n, slow.size());
        return 2;
      }
      actors::local_cluster::options o;
      o.exe = ASTEROID_CLI_PATH;
      o.nodes = n;
      o.base_port = static_cast<uint16_t>(base_port);
      o.slowdowns.assign(slow.begin(), slow.begin() + n);
      actors::local_cluster cluster{o};
      actors::serve_spec spec;
      spec.model = model;
      spec.nodes = cluster.endpoints();
      spec.micro_batch = micro_batch;
      spec.requests = requests;
      spec.dataset = "synthetic";
      spec.planner = "edgepipe";
      spec.profile = profile;
      spec.measure_links = measure;
      auto r = actors::run_serve(spec);
      const std::string links = n == 1 ? "none" : actors::describe_links(r.stats["links"]);
      std::string stages;
      for (const auto& st : r.plan.stages)
        stages += (stages.empty() ? "" : " ") + std::to_string(st.device) + ":"
                  + std::to_string(st.first_layer) + "-" + std::to_string(st.end_layer);
      if (n == 1 && measure) {
        one_measured = r.samples_per_s;
        one_predicted = r.plan.samples_per_s;
      }
      std::printf("%-6d %-30s %-28s %12.1f %12.1f %9.2f %10.2f %10.2f\n", n, links.c_str(),
                  stages.c_str(),
                  r.plan.samples_per_s, r.samples_per_s,
                  r.plan.samples_per_s > 0 ? r.samples_per_s / r.plan.samples_per_s : 0.0,
                  one_measured > 0 ? r.samples_per_s / one_measured : 0.0,
                  one_predicted > 0 ? r.plan.samples_per_s / one_predicted : 0.0);
      std::fflush(stdout);
    }
  return 0;
}
