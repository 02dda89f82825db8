// `asteroid devices`: the device catalog, or a cluster file's devices with
// the speeds an emulation gives them. With --model, each device's speed is
// its absolute time per sample of that model (its own figure, else its
// catalog type's) against this machine's, measured here: the figure the
// emulated testbed (scripts/testbed.sh --speeds absolute) pads each node's
// compute to.
#include "commands.hpp"
#include "number_checks.hpp"
#include "profile_source.hpp"

#include "asteroid/planner/device_catalog.hpp"
#include "asteroid/planner/json_io.hpp"

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <cstdio>
#include <iostream>
#include <stdexcept>

namespace asteroid::apps {

namespace {

struct devices_args {
  std::string cluster_path;
  std::string model;
  std::string profile_path;
  int64_t batch = 32;
  int threads = 1;
  bool json = false;
};

/// This machine's seconds per sample of `a.model` (forward and backward of a
/// batch of `a.batch`, per sample) from `a.profile_path` or measured here.
double host_seconds_per_sample(const devices_args& a) {
  profile_source source;
  source.model = a.model;
  source.profile_path = a.profile_path;
  source.measure = a.profile_path.empty(); // never the analytic estimates
  source.batch_sizes = std::to_string(a.batch);
  // As many threads as the nodes it emulates use (asteroid node --threads).
  torch::set_num_threads(a.threads);
  auto profile = source.resolve();
  const auto b = static_cast<double>(a.batch);
  const double step_s = profile.step_time(b);
  if (!(step_s > 0))
    throw std::invalid_argument("the profile of " + a.model
                                + " has no positive time at batch "
                                + std::to_string(a.batch));
  return step_s / b;
}

void print_catalog(bool json) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& t : planner::device_catalog()) {
    nlohmann::json per_model = nlohmann::json::object();
    for (const auto& [m, s] : t.seconds_per_sample)
      per_model[m] = {{"seconds", s}, {"source", t.seconds_per_sample_source.at(m)}};
    out.push_back({{"type", t.type},
                   {"description", t.description},
                   {"speed", t.speed},
                   {"speed_is_assumption", t.speed_is_assumption},
                   {"memory_bytes", t.default_budget_bytes},
                   {"seconds_per_sample", per_model}});
  }
  if (json) {
    std::cout << nlohmann::json{{"catalog", out}}.dump(2) << '\n';
    return;
  }
  for (const auto& t : out) {
    std::printf("%s: %s\n  speed %.3f x jetson-nano%s, default memory budget %s\n",
                t["type"].get<std::string>().c_str(),
                t["description"].get<std::string>().c_str(), t["speed"].get<double>(),
                t["speed_is_assumption"].get<bool>() ? " (ASSUMPTION)" : "",
                planner::format_bytes(t["memory_bytes"].get<int64_t>()).c_str());
    for (const auto& [m, v] : t["seconds_per_sample"].items())
      std::printf("  %s: %.1f ms per sample (%s)\n", m.c_str(),
                  1e3 * v["seconds"].get<double>(),
                  v["source"].get<std::string>().c_str());
  }
}

void print_cluster(const devices_args& a) {
  auto c = planner::load_cluster_file(a.cluster_path);
  double host_s = 0;
  if (!a.model.empty()) {
    // A device without a figure for the model is refused before this
    // machine is measured (a minute for a large model).
    planner::absolute_speeds(c, a.model, 1.0);
    host_s = host_seconds_per_sample(a);
    c = planner::absolute_speeds(c, a.model, host_s);
  }
  nlohmann::json devices = nlohmann::json::array();
  for (const auto& d : c.devices) {
    nlohmann::json j{{"name", d.name},
                     {"type", d.type},
                     {"speed", d.speed},
                     {"memory_bytes", d.memory_bytes}};
    if (!a.model.empty())
      j["seconds_per_sample"] = planner::seconds_per_sample(d, a.model);
    devices.push_back(std::move(j));
  }
  if (a.json) {
    nlohmann::json out{{"cluster", a.cluster_path}, {"devices", devices}};
    if (!a.model.empty()) {
      out["model"] = a.model;
      out["batch"] = a.batch;
      out["host_seconds_per_sample"] = host_s;
      out["speed_relative_to"] = "this machine";
    } else {
      out["speed_relative_to"] = "jetson-nano";
    }
    std::cout << out.dump(2) << '\n';
    return;
  }
  if (!a.model.empty())
    std::printf("%s: this machine %.2f ms per sample (batch %lld); speeds relative "
                "to this machine\n",
                a.model.c_str(), 1e3 * host_s, static_cast<long long>(a.batch));
  else
    std::printf("speeds relative to jetson-nano\n");
  for (const auto& d : devices) {
    std::printf("%-16s %-12s speed %7.3f  memory %s", d["name"].get<std::string>().c_str(),
                d["type"].get<std::string>().c_str(), d["speed"].get<double>(),
                planner::format_bytes(d["memory_bytes"].get<int64_t>()).c_str());
    if (d.contains("seconds_per_sample"))
      std::printf("  %.1f ms per sample", 1e3 * d["seconds_per_sample"].get<double>());
    std::printf("\n");
  }
}

} // namespace

void add_devices_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
    "devices", "List the device catalog, or a cluster file's devices with their speeds "
               "(with --model: absolute, from each device's time per sample against "
               "this machine's)");
  auto a = std::make_shared<devices_args>();
  cmd->add_option("--cluster,-c", a->cluster_path, "Cluster file (see examples/clusters/)")
    ->check(CLI::ExistingFile);
  cmd->add_option("--model,-m", a->model,
                  "Zoo model whose time per sample sets the speeds (the device's "
                  "\"seconds_per_sample\", else its catalog type's); this machine's "
                  "is measured (or read from --profile)");
  cmd->add_option("--profile", a->profile_path,
                  "Profile of --model on this machine (asteroid profile) instead of "
                  "measuring it");
  cmd->add_option("--batch,-b", a->batch, "Batch size this machine's time per sample is taken at")
    ->check(positive_finite())
    ->capture_default_str();
  cmd->add_option("--threads", a->threads,
                  "LibTorch threads this machine is measured with (those of the nodes)")
    ->check(positive_finite())
    ->capture_default_str();
  cmd->add_flag("--json", a->json, "Print JSON instead of text");
  cmd->callback([a] {
    if (a->cluster_path.empty()) {
      if (!a->model.empty() || !a->profile_path.empty())
        throw CLI::ValidationError("--model and --profile need --cluster");
      return print_catalog(a->json);
    }
    if (!a->profile_path.empty() && a->model.empty())
      throw CLI::ValidationError("--profile needs --model");
    print_cluster(*a);
  });
}

} // namespace asteroid::apps
