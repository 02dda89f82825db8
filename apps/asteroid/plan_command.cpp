#include "commands.hpp"

#include "asteroid/planner/cost_model.hpp"
#include "asteroid/planner/device_catalog.hpp"
#include "asteroid/planner/json_io.hpp"
#include "asteroid/planner/plan_table.hpp"
#include "asteroid/planner/planner.hpp"
#include "profile_source.hpp"

#include <cstdio>
#include <iostream>

namespace asteroid::apps {

namespace {

struct plan_args {
  profile_source source;
  std::string cluster_path;
  int64_t batch_size = 32;
  std::string planner = "asteroid";
  std::string json_out;
  bool compare = false;
};

// Every planner side by side: what a user asks first when choosing a layout.
void print_comparison(const planner::model_profile& profile,
                      const planner::cluster& c, int64_t batch) {
  std::printf("%-16s %14s %10s\n", "planner", "samples/s", "stages");
  double asteroid_rate = 0;
  std::vector<std::pair<std::string, double>> rows;
  for (auto& name : planner::planner_names()) {
    if (name == "exhaustive" && (c.size() > 5 || profile.num_layers() > 8)) {
      std::printf("%-16s %14s\n", name.c_str(), "(too large)");
      continue;
    }
    try {
      auto p = planner::make_planner(name)->make_plan(profile, c, batch);
      std::printf("%-16s %14.2f %10d\n", name.c_str(),
                  p.predicted_samples_per_s, p.num_stages());
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
    "plan", "Plan hybrid pipeline parallel training of a model on a cluster");
  auto a = std::make_shared<plan_args>();
  a->source.add_options(cmd);
  cmd->add_option("--cluster,-c", a->cluster_path,
                  "Cluster file (see examples/clusters/)")
    ->required()
    ->check(CLI::ExistingFile);
  cmd->add_option("--batch-size,-b", a->batch_size, "Mini-batch size")
    ->check(CLI::PositiveNumber)
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
  cmd->callback([a] {
    auto profile = a->source.resolve();
    auto c = planner::rebase_speeds(planner::load_cluster_file(a->cluster_path),
                                    profile);
    if (a->compare) {
      print_comparison(profile, c, a->batch_size);
      return;
    }
    auto p = planner::make_planner(a->planner)->make_plan(profile, c,
                                                          a->batch_size);
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
