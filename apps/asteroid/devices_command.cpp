// `asteroid devices`: the device catalog, or a cluster file's devices with
// the speeds an emulation gives them. With --model, each device's speed is
// its absolute time per sample of that model (its own figure, else its
// catalog type's) against this machine's, measured here: the figure the
// emulated testbed (scripts/testbed.sh --speeds absolute) pads each node's
// compute to.
#include "commands.hpp"
#include "number_checks.hpp"
#include "profile_source.hpp"

#include "asteroid/kernels/cpu_threads.hpp"
#include "asteroid/models/zoo.hpp"
#include "asteroid/planner/device_catalog.hpp"
#include "asteroid/planner/json_io.hpp"
#include "asteroid/training/model_options_json.hpp"

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
  std::string model_options;
  int64_t batch = 32;
  int threads = 1;
  bool json = false;
};

nlohmann::json parse_options(const std::string& text, const std::string& what) {
  try {
    auto j = nlohmann::json::parse(text);
    if (j.is_object())
      return j;
  } catch (const nlohmann::json::exception&) {
  }
  throw std::invalid_argument(what + " '" + text + "' is not a JSON object");
}

/// `options` with what they leave out at the zoo's defaults, the input size
/// read from the model they build (0 stands for its default input).
nlohmann::json with_defaults(const std::string& model, const nlohmann::json& options) {
  const auto o = training::model_options_from_json(options);
  auto full = training::to_json(o);
  if (full.value("image_size", int64_t{0}) == 0) {
    const auto shape = models::make_model(model, o)->input_shape();
    if (shape.size() == 3)
      full["image_size"] = shape.back();
  }
  return full;
}

/// The model options this machine is measured with: --model-options, else
/// the input of the catalog's times. A device timed by its catalog type must
/// be compared with this machine on the input those times are for (a
/// 224x224 ResNet-50 time against a 32x32 measurement would slow it by the
/// inputs' ratio), so options that contradict that input are refused.
nlohmann::json measured_options(const devices_args& a, const planner::cluster& c) {
  const auto catalog_text = planner::catalog_model_options(a.model);
  auto catalog = catalog_text.empty() ? nlohmann::json::object()
                                      : parse_options(catalog_text, "catalog options");
  if (a.model_options.empty())
    return catalog;
  auto given = parse_options(a.model_options, "--model-options");
  if (catalog.empty())
    return given; // no catalog figure names an input to hold them against
  nlohmann::json effective; // built once a device needs it (a model build)
  for (const auto& d : c.devices) {
    auto own = d;
    own.type.clear(); // its own figure only
    if (planner::seconds_per_sample(own, a.model) > 0)
      continue;
    if (effective.is_null())
      effective = with_defaults(a.model, given);
    for (const auto& [key, value] : catalog.items())
      if (!effective.contains(key) || effective[key] != value)
        throw std::invalid_argument(
          "device " + d.name + " takes its time per sample of " + a.model + " from the "
          + d.type + " catalog entry, which is for the model options " + catalog.dump()
          + "; --model-options " + given.dump() + " differ in \"" + key + "\" ("
          + (effective.contains(key) ? effective[key].dump() : std::string("none"))
          + " with the zoo's defaults filled in; measure on that input, or give the device "
            "its own \"seconds_per_sample\" in the cluster file)");
  }
  return given;
}

/// This machine's seconds per sample of `a.model` with `options` (forward and
/// backward of a batch of `a.batch`, per sample) from `a.profile_path` or
/// measured here.
double host_seconds_per_sample(const devices_args& a, const nlohmann::json& options) {
  profile_source source;
  source.model = a.model;
  source.model_options = options;
  source.profile_path = a.profile_path;
  source.measure = a.profile_path.empty(); // never the analytic estimates
  source.batch_sizes = std::to_string(a.batch);
  // As many threads as the nodes it emulates use (asteroid node --threads).
  kernels::set_cpu_threads(a.threads);
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
      per_model[m] = {{"seconds", s},
                      {"source", t.seconds_per_sample_source.at(m)},
                      {"model_options", parse_options(planner::catalog_model_options(m),
                                                      "catalog options")}};
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
      std::printf("  %s: %.1f ms per sample on %s (%s)\n", m.c_str(),
                  1e3 * v["seconds"].get<double>(), v["model_options"].dump().c_str(),
                  v["source"].get<std::string>().c_str());
  }
}

void print_cluster(const devices_args& a) {
  auto c = planner::load_cluster_file(a.cluster_path);
  double host_s = 0;
  nlohmann::json options = nlohmann::json::object();
  if (!a.model.empty()) {
    // A device without a figure for the model, or options that contradict
    // the figures' input, are refused before this machine is measured (a
    // minute for a large model).
    planner::absolute_speeds(c, a.model, 1.0);
    options = measured_options(a, c);
    host_s = host_seconds_per_sample(a, options);
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
      out["model_options"] = options;
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
    std::printf("%s (model options %s): this machine %.2f ms per sample (batch %lld); "
                "speeds relative to this machine\n",
                a.model.c_str(), options.dump().c_str(), 1e3 * host_s,
                static_cast<long long>(a.batch));
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
  cmd->add_option("--model-options", a->model_options,
                  "Zoo model options (JSON) this machine is measured with, e.g. the job's; "
                  "default: the input of the catalog's times (asteroid devices lists them; "
                  "ResNet-50 at 3x224x224, 100 classes), and options contradicting that "
                  "input are refused for a device timed by its catalog type");
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
      if (!a->model.empty() || !a->profile_path.empty() || !a->model_options.empty())
        throw CLI::ValidationError("--model, --model-options and --profile need --cluster");
      return print_catalog(a->json);
    }
    if ((!a->profile_path.empty() || !a->model_options.empty()) && a->model.empty())
      throw CLI::ValidationError("--profile and --model-options need --model");
    print_cluster(*a);
  });
}

} // namespace asteroid::apps
