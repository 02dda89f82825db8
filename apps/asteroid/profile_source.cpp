#include "profile_source.hpp"
#include "number_checks.hpp"

#include "asteroid/models/zoo.hpp"
#include "asteroid/planner/analytic_profiles.hpp"
#include "asteroid/planner/json_io.hpp"
#include "asteroid/planner/pipedream_graph.hpp"
#include "asteroid/training/model_options_json.hpp"
#include "asteroid/training/profiler.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <unistd.h>

namespace asteroid::apps {

std::vector<int64_t> parse_batch_sizes(const std::string& text) {
  std::vector<int64_t> sizes;
  std::stringstream in{text};
  std::string item;
  while (std::getline(in, item, ',')) {
    try {
      size_t used = 0;
      auto v = std::stoll(item, &used);
      if (used != item.size() || v <= 0)
        throw std::invalid_argument(item);
      sizes.push_back(v);
    } catch (const std::exception&) {
      throw std::invalid_argument("--batch-sizes: '" + item
                                  + "' is not a positive integer");
    }
  }
  if (sizes.empty() || !std::is_sorted(sizes.begin(), sizes.end()))
    throw std::invalid_argument("--batch-sizes: expected ascending sizes "
                                "like 1,8,32, got '" + text + "'");
  return sizes;
}

namespace {

std::filesystem::path cache_dir() {
  if (auto* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return std::filesystem::path{xdg} / "asteroid" / "profiles";
  if (auto* home = std::getenv("HOME"); home && *home)
    return std::filesystem::path{home} / ".cache" / "asteroid" / "profiles";
  return {};
}

// A profile is only valid for the machine, thread count and model options
// (an input size) it was taken with.
std::string cache_key(const std::string& model, const std::string& sizes,
                      const nlohmann::json& options) {
  char host[256] = "unknown-host";
  gethostname(host, sizeof(host) - 1);
  std::ostringstream key;
  key << model << "_b" << sizes << "_t" << torch::get_num_threads();
  if (!options.empty())
    key << "_o" << std::hex << std::hash<std::string>{}(options.dump()) << std::dec;
  key << "_" << host << ".json";
  auto name = key.str();
  std::replace(name.begin(), name.end(), ',', '-');
  std::replace(name.begin(), name.end(), '/', '_');
  return name;
}

// PipeDream's graph.txt starts with node lines; a profile JSON with "{".
bool looks_like_pipedream_graph(const std::string& path) {
  std::ifstream in{path};
  std::string line;
  while (std::getline(in, line)) {
    auto first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos || line[first] == '#')
      continue;
    return line.compare(first, 4, "node") == 0;
  }
  return false;
}

} // namespace

void profile_source::add_options(CLI::App* cmd) {
  cmd->add_option("--profile", profile_path,
                  "Model profile: JSON from `asteroid profile`, or a PipeDream "
                  "graph.txt (with --profiled-batch)")
    ->check(CLI::ExistingFile);
  cmd->add_option("--profile-format", profile_format,
                  "Format of --profile: auto (graph.txt if its first line "
                  "starts with 'node'), json or pipedream")
    ->check(CLI::IsMember({"auto", "json", "pipedream"}))
    ->capture_default_str();
  cmd->add_option("--profiled-batch", profiled_batch,
                  "Batch size a PipeDream graph.txt was profiled at (its "
                  "times and activation sizes are for a whole batch)")
    ->check(positive_finite());
  cmd->add_option("--optimizer-state-factor", optimizer_state_factor,
                  "Optimizer state bytes per parameter byte for a graph.txt "
                  "(0 plain SGD, 1 momentum, 2 Adam)")
    ->check(finite_number(0, 16))
    ->capture_default_str();
  cmd->add_option("--model,-m", model,
                  "Model name: analytic estimates for mobilenetv2, "
                  "efficientnet-b1, resnet50, bert-small (and vit-large for "
                  "inference); zoo models are measured here (implies --measure)");
  cmd->add_flag("--measure", measure,
                "Measure the zoo model on this machine instead of using "
                "analytic estimates");
  cmd->add_flag("--no-cache{false}", use_cache,
                "Measure again even if a cached profile exists");
  cmd->add_option("--batch-sizes", batch_sizes,
                  "Micro-batch sizes to measure at (with --measure)")
    ->capture_default_str();
}

planner::model_profile profile_source::resolve() const {
  if (!profile_path.empty()) {
    bool pipedream = profile_format == "pipedream" ||
                     (profile_format == "auto" && looks_like_pipedream_graph(profile_path));
    if (!pipedream)
      return planner::load_model_profile_file(profile_path);
    if (profiled_batch <= 0)
      throw std::invalid_argument(
        profile_path + " is a PipeDream graph.txt: give the batch size it was "
        "profiled at with --profiled-batch N");
    planner::pipedream_import_options o;
    o.batch_size = profiled_batch;
    o.optimizer_state_factor = optimizer_state_factor;
    o.model = model.empty() ? std::filesystem::path{profile_path}.stem().string() : model;
    return planner::load_pipedream_graph(profile_path, o);
  }
  if (model.empty())
    throw std::invalid_argument("give --profile FILE or --model NAME");
  auto analytic = planner::analytic_model_names();
  analytic.push_back("vit-large"); // planned for inference only
  bool is_analytic = std::find(analytic.begin(), analytic.end(), model)
                     != analytic.end();
  if (is_analytic && !measure)
    return planner::analytic_profile(model);
  training::profiler_options o;
  o.batch_sizes = parse_batch_sizes(batch_sizes);
  auto dir = cache_dir();
  auto cached = dir.empty() ? dir : dir / cache_key(model, batch_sizes, model_options);
  if (use_cache && !cached.empty() && std::filesystem::exists(cached)) {
    spdlog::info("using cached profile {}", cached.string());
    return planner::load_model_profile_file(cached.string());
  }
  auto m = models::make_model(model, training::model_options_from_json(model_options).seed(0));
  auto profile = training::profile_model(m, model, o);
  if (!cached.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (!ec) {
      planner::save_model_profile_file(profile, cached.string());
      spdlog::info("cached profile in {}", cached.string());
    }
  }
  return profile;
}

} // namespace asteroid::apps
