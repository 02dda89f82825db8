#include "commands.hpp"
#include "number_checks.hpp"

#include "asteroid/planner/asteroid_planner.hpp"
#include "asteroid/planner/cost_model.hpp"
#include "asteroid/planner/device_catalog.hpp"
#include "asteroid/planner/inference_planner.hpp"
#include "asteroid/planner/json_io.hpp"
#include "asteroid/planner/plan_table.hpp"
#include "asteroid/planner/planner.hpp"
#include "profile_source.hpp"

#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>

namespace asteroid::apps {

namespace {

struct plan_args {
  profile_source source;
  std::string cluster_path;
  int64_t batch_size = 32;
  std::string planner = "asteroid";
  std::string json_out;
  bool compare = false;
  bool snapshots = false;
  std::string mode = "training";
  planner::inference_options inference;
  planner::asteroid_options search; // the asteroid planner's limits
};

planner::inference_plan make_inference_plan(const std::string& name,
                                            const planner::model_profile& profile,
                                            const planner::cluster& c,
                                            const planner::inference_options& o) {
  if (name == "edgepipe")
    return planner::plan_inference(profile, c, o);
  if (name == "exhaustive")
    return planner::plan_inference_exhaustive(profile, c, o);
  if (name == "straight")
    return planner::plan_inference_straight(profile, c, o);
  if (name == "on-device")
    return planner::plan_inference_on_device(profile, c, o);
  throw std::invalid_argument("--planner " + name
                              + ": inference planners are edgepipe, exhaustive, "
                                "straight and on-device");
}

void print_inference_plan(const planner::inference_plan& p,
                          const planner::model_profile& profile,
                          const planner::cluster& c) {
  std::printf("%s inference plan: %d stages, micro-batch %lld, %.2f samples/s "
              "(one request every %.2f ms), latency %.2f ms\n",
              p.planner.c_str(), p.num_stages(), static_cast<long long>(p.micro_batch),
              p.samples_per_s, 1e3 * p.bottleneck_s, 1e3 * p.latency_s);
  std::printf("%-6s %-42s %-12s %12s %10s %12s %12s\n", "stage", "layers", "device",
              "compute ms", "send ms", "memory", "budget");
  for (size_t s = 0; s < p.stages.size(); ++s) {
    const auto& st = p.stages[s];
    const auto& dev = c.devices[static_cast<size_t>(st.device)];
    auto layers = profile.layers[static_cast<size_t>(st.first_layer)].name + " .. "
                  + profile.layers[static_cast<size_t>(st.end_layer - 1)].name;
    std::printf("%-6zu %-42s %-12s %12.2f %10.2f %12s %12s%s\n", s, layers.c_str(),
                dev.name.c_str(), 1e3 * st.compute_s, 1e3 * st.send_s,
                planner::format_bytes(st.memory_bytes).c_str(),
                planner::format_bytes(dev.memory_bytes).c_str(),
                st.memory_bytes > dev.memory_bytes ? "  (does not fit)" : "");
  }
}

void print_inference_comparison(const planner::model_profile& profile,
                                const planner::cluster& c,
                                const planner::inference_options& o) {
  std::printf("%-12s %14s %10s\n", "planner", "samples/s", "stages");
  for (const char* name : {"edgepipe", "exhaustive", "straight", "on-device"}) {
    try {
      auto p = make_inference_plan(name, profile, c, o);
      std::printf("%-12s %14.2f %10d%s\n", name, p.samples_per_s, p.num_stages(),
                  planner::inference_fits_memory(p, c) ? "" : "  (does not fit in memory)");
    } catch (const std::exception& e) {
      std::printf("%-12s %14s  %s\n", name, "-", e.what());
    }
  }
}

/// Planner `name`; the asteroid planner with the command's search limits.
std::unique_ptr<planner::planner_base> make_training_planner(
  const std::string& name, const planner::asteroid_options& search) {
  if (name == "asteroid")
    return std::make_unique<planner::asteroid_planner>(search);
  return planner::make_planner(name);
}

// Every planner side by side: what a user asks first when choosing a layout.
void print_comparison(const planner::model_profile& profile,
                      const planner::cluster& c, int64_t batch,
                      const planner::asteroid_options& search) {
  // Two predictions: the closed form the planners rank by, and the plan's
  // 1F1B schedule simulated (docs/planner.md, "Two predictions").
  std::printf("%-16s %14s %14s %10s\n", "planner", "samples/s", "simulated", "stages");
  double asteroid_rate = 0;
  std::vector<std::pair<std::string, double>> rows;
  for (auto& name : planner::planner_names()) {
    if (name == "exhaustive" && (c.size() > 5 || profile.num_layers() > 8)) {
      std::printf("%-16s %14s\n", name.c_str(), "(too large)");
      continue;
    }
    try {
      auto p = make_training_planner(name, search)->make_plan(profile, c, batch);
      std::printf("%-16s %14.2f %14.2f %10d\n", name.c_str(), p.predicted_samples_per_s,
                  p.simulated_samples_per_s, p.num_stages());
      if (name == "asteroid")
        asteroid_rate = p.predicted_samples_per_s;
      rows.emplace_back(name, p.predicted_samples_per_s);
    } catch (const std::exception& e) {
      std::printf("%-16s %14s  %s\n", name.c_str(), "infeasible", e.what());
    }
  }
  if (asteroid_rate > 0) {
    std::printf("\nasteroid speedup over:");
    for (auto& [name, rate] : rows)
      if (name != "asteroid" && rate > 0)
        std::printf(" %s %.2fx", name.c_str(), asteroid_rate / rate);
    std::printf("\n");
  }
}

} // namespace

void add_plan_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
    "plan", "Plan training (hybrid pipeline parallelism) or inference (--mode inference) of a model on a cluster");
  auto a = std::make_shared<plan_args>();
  a->source.add_options(cmd);
  cmd->add_option("--cluster,-c", a->cluster_path,
                  "Cluster file (see examples/clusters/)")
    ->required()
    ->check(CLI::ExistingFile);
  cmd->add_option("--batch-size,-b", a->batch_size, "Mini-batch size")
    ->check(positive_finite())
    ->capture_default_str();
  cmd->add_option("--planner,-p", a->planner,
                  "asteroid, on-device, dp-even, dp-proportional, pp, "
                  "pipedream, ftpipehd, pipeedge or exhaustive")
    ->capture_default_str();
  cmd->add_option("--json", a->json_out,
                  "Also write the plan as JSON (accepted by `asteroid train "
                  "--config`); '-' prints it instead of the table");
  cmd->add_flag("--compare", a->compare,
                "Run every planner and print their predicted throughput");
  cmd->add_flag("--snapshots", a->snapshots,
                "Training: count the copy of each stage's weights and optimizer "
                "state that a job taking snapshots (fault_tolerance.snapshot_every "
                "> 0, a job's default) holds between steps in every device's "
                "memory; without it, as a profile says (\"state_snapshots\", "
                "off unless set)");
  cmd->add_option("--max-search-seconds", a->search.max_search_seconds,
                  "The asteroid planner refuses up front a search it estimates longer than "
                  "this (0: no limit)")
    ->check(non_negative_finite())
    ->capture_default_str();
  cmd->add_option("--max-micro-batches", a->search.max_micro_batches,
                  "The asteroid planner tries micro-batch counts up to this (0: every divisor "
                  "of the batch size)")
    ->check(CLI::Range(0, 1 << 20))
    ->capture_default_str();
  cmd->add_option("--mode", a->mode,
                  "training (hybrid pipeline parallelism) or inference (one "
                  "device per stage, EdgePipe's planner; its planners are "
                  "edgepipe, the default, exhaustive, straight and on-device)")
    ->check(CLI::IsMember({"training", "inference"}))
    ->capture_default_str();
  cmd->add_option("--micro-batch", a->inference.micro_batch,
                  "Inference: samples per request")
    ->check(positive_finite())
    ->capture_default_str();
  cmd->add_option("--queue-depth", a->inference.queue_depth,
                  "Inference: requests each stage holds in its receive and in "
                  "its send queue (counted in its memory)")
    ->check(non_negative_finite())
    ->capture_default_str();
  cmd->callback([a] {
    auto profile = a->source.resolve();
    if (a->snapshots)
      profile.state_snapshots = true;
    auto c = planner::rebase_speeds(planner::load_cluster_file(a->cluster_path),
                                    profile);
    if (a->mode == "inference") {
      if (a->compare) {
        print_inference_comparison(profile, c, a->inference);
        return;
      }
      auto name = a->planner == "asteroid" ? std::string("edgepipe") : a->planner;
      auto p = make_inference_plan(name, profile, c, a->inference);
      nlohmann::json j = p;
      if (a->json_out == "-") {
        std::cout << j.dump(2) << '\n';
        return;
      }
      print_inference_plan(p, profile, c);
      if (!a->json_out.empty()) {
        std::ofstream out{a->json_out};
        out << j.dump(2) << '\n';
        if (!out)
          throw std::runtime_error("cannot write " + a->json_out);
        std::fprintf(stderr, "wrote %s\n", a->json_out.c_str());
      }
      return;
    }
    if (a->compare) {
      print_comparison(profile, c, a->batch_size, a->search);
      return;
    }
    auto p = make_training_planner(a->planner, a->search)->make_plan(profile, c, a->batch_size);
    if (a->json_out == "-") {
      nlohmann::json j = p;
      std::cout << j.dump(2) << '\n';
      return;
    }
    std::cout << planner::format_plan_table(p, profile, c);
    if (!a->json_out.empty()) {
      planner::save_plan_file(p, a->json_out);
      std::fprintf(stderr, "wrote %s\n", a->json_out.c_str());
    }
  });
}

} // namespace asteroid::apps
