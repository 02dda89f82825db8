#pragma once

#include "asteroid/planner/model_profile.hpp"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <memory>
#include <string>

namespace asteroid::apps {

/// Where a planning command gets its model profile from: a profile file, the
/// analytic estimates the planner ships for the paper's models, or a fresh
/// measurement of a zoo model on this machine.
struct profile_source {
  std::string profile_path;
  std::string model;
  bool measure = false;
  bool use_cache = true;
  std::string batch_sizes = "1,8,32";
  /// Zoo model options of a measured model, e.g. its input size; what
  /// they leave out takes the zoo's defaults.
  nlohmann::json model_options = nlohmann::json::object();
  /// "auto" (a file whose first line starts with "node" is a PipeDream
  /// graph.txt, anything else an Asteroid profile JSON), "json" or "pipedream".
  std::string profile_format = "auto";
  /// Batch size a PipeDream graph.txt was profiled at (its times and
  /// activation sizes are per batch): required for one.
  int64_t profiled_batch = 0;
  /// Optimizer state bytes per parameter byte for a graph.txt (it has none).
  double optimizer_state_factor = 1.0;

  /// Adds --profile, --profile-format, --profiled-batch,
  /// --optimizer-state-factor, --model, --measure, --no-cache and
  /// --batch-sizes.
  void add_options(CLI::App* cmd);

  /// Loads, looks up or measures the profile; throws naming what is missing.
  ///
  /// Measured profiles are cached per model, batch sizes, host and thread
  /// count under $XDG_CACHE_HOME/asteroid/profiles (or ~/.cache/...), so
  /// planning the same model again costs no measurement.
  planner::model_profile resolve() const;
};

/// Parses "1,8,32" into ascending positive sizes; throws naming the value.
std::vector<int64_t> parse_batch_sizes(const std::string& text);

} // namespace asteroid::apps
