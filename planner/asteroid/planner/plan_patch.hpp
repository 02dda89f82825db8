#pragma once
/// \file
/// Lightweight re-planning after device losses (docs/fault_tolerance.md):
/// keep every surviving assignment, move only what the lost devices did.
/// Pure: the runtime decides *when* to patch and where weights come from.
#include "asteroid/planner/cluster.hpp"
#include "asteroid/planner/model_profile.hpp"
#include "asteroid/planner/plan.hpp"

#include <optional>
#include <set>
#include <string>
#include <vector>

namespace asteroid::planner {

/// The device that holds the replica of stage `stage`'s weights outside its
/// group: the first device of the next stage, and for the last stage the
/// first device of the previous one. The replica must sit on an *adjacent*
/// stage so that, when a single-device stage is lost, its layers can be
/// merged into the stage that already holds them (contiguous ranges).
/// -1 for a one-stage plan (group peers are the only copies).
int backup_device(const plan& p, int stage);

/// What a patch did, for logs and metrics.
struct plan_patch {
  plan patched;
  /// One line per change ("stage 1: device 2 removed, shares 11:5 -> 16").
  std::vector<std::string> changes;
};

/// How a patch treats a group that lost members.
struct patch_options {
  /// true: new shares by Algorithm 1 over the survivors. false: "no
  /// re-scheduling" (the paper's Figure-17 baseline): each lost member's share
  /// goes whole to the group's first survivor and nothing else changes.
  bool rebalance = true;
};

/// Removes `lost` devices from `p`:
/// - a group that keeps members gets new shares by Algorithm 1 over the
///   survivors (memory-aware when `profile` is given, else proportional to
///   the cluster speeds);
/// - a stage left without devices is merged into the adjacent stage that
///   holds its replica (`backup_device`), or the other neighbour when that
///   one is empty too.
/// Every other stage, group and share is kept. `profile` (optional) also
/// fills the plan's predictions. Throws planner_error when nothing survives.
plan_patch patch_plan(const plan& p, const std::set<int>& lost,
                      const cluster& c,
                      const std::optional<model_profile>& profile = std::nullopt,
                      const patch_options& options = {});

} // namespace asteroid::planner
