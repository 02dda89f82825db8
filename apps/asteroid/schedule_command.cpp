#include "commands.hpp"
#include "number_checks.hpp"

#include "asteroid/planner/chrome_trace.hpp"
#include "asteroid/planner/cost_model.hpp"
#include "asteroid/planner/device_catalog.hpp"
#include "asteroid/planner/json_io.hpp"
#include "asteroid/planner/schedule.hpp"
#include "asteroid/planner/simulator.hpp"
#include "profile_source.hpp"

#include <cstdio>
#include <iostream>
#include <stdexcept>

namespace asteroid::apps {

namespace {

struct schedule_args {
  std::string plan_path;
  int stages = 0;
  int micro_batches = 4;
  std::string kind = "1f1b";
  bool all_replicas = false;
  profile_source source;
  std::string cluster_path;
  std::string trace_path;
};

// A plan with one device per stage and no layers, enough to print the order.
planner::plan shape_only_plan(int stages, int micro_batches) {
  planner::plan p;
  p.planner = "shape";
  p.micro_batches = micro_batches;
  p.batch_size = micro_batches;
  for (int s = 0; s < stages; ++s)
    p.stages.push_back({s, s + 1, {s}, {1}});
  return p;
}

} // namespace

void add_schedule_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
    "schedule", "Print the per-replica instruction streams of a plan, and "
                "optionally simulate them under the cost model");
  auto a = std::make_shared<schedule_args>();
  auto* plan_opt = cmd->add_option("--plan", a->plan_path,
                                   "Plan JSON (from `asteroid plan --json`)")
                     ->check(CLI::ExistingFile);
  cmd->add_option("--stages", a->stages,
                  "Without --plan: number of stages, one device each")
    ->excludes(plan_opt)
    ->check(positive_finite());
  cmd->add_option("--micro-batches", a->micro_batches,
                  "Without --plan: micro-batches per mini-batch")
    ->check(positive_finite())
    ->capture_default_str();
  cmd->add_option("--kind", a->kind, "1f1b or gpipe")->capture_default_str();
  cmd->add_flag("--all-replicas", a->all_replicas,
                "Print every replica's stream, not only replica 0's");
  a->source.add_options(cmd);
  cmd->add_option("--cluster,-c", a->cluster_path,
                  "With --plan and a profile: simulate on this cluster")
    ->check(CLI::ExistingFile);
  cmd->add_option("--trace", a->trace_path,
                  "Write the simulated timeline as a Chrome trace (open in "
                  "Perfetto)");
  cmd->callback([a] {
    auto kind = planner::parse_schedule_kind(a->kind);
    planner::plan p;
    if (!a->plan_path.empty())
      p = planner::load_plan_file(a->plan_path);
    else if (a->stages > 0)
      p = shape_only_plan(a->stages, a->micro_batches);
    else
      throw std::invalid_argument("give --plan FILE or --stages N");
    std::cout << planner::format_schedule(p, kind, a->all_replicas);
    if (a->cluster_path.empty())
      return;
    if (a->plan_path.empty())
      throw std::invalid_argument("--cluster needs --plan");
    auto profile = a->source.resolve();
    auto c = planner::rebase_speeds(planner::load_cluster_file(a->cluster_path),
                                    profile);
    auto steps = planner::make_steps(p, profile, c);
    planner::simulator_options so;
    so.record_events = !a->trace_path.empty();
    auto r = planner::simulate(p, steps, kind, so);
    std::printf("\nsimulated round %.4f s (analytic %.4f s), bubble %.1f%%, "
                "%.2f samples/s\n",
                r.round_s, planner::round_latency(steps),
                r.bubble_fraction * 100, p.batch_size / r.round_s);
    if (!a->trace_path.empty()) {
      std::vector<std::string> names;
      for (auto& d : c.devices)
        names.push_back(d.name);
      planner::write_chrome_trace(planner::trace_from_simulation(r, names),
                                  a->trace_path);
      std::fprintf(stderr, "wrote %s\n", a->trace_path.c_str());
    }
  });
}

} // namespace asteroid::apps
