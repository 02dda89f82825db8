#pragma once

#include <string>

#include "asteroid/planner/cluster.hpp"
#include "asteroid/planner/model_profile.hpp"
#include "asteroid/planner/plan.hpp"

namespace asteroid::planner {

/// A plain-text report of a plan: one block per stage with its layers (by
/// name), devices, shares and memory vs budget, then the predicted round
/// time and samples/s. Predictions are recomputed with `evaluate`.
std::string format_plan_table(const plan& p, const model_profile& profile,
                              const cluster& c);

} // namespace asteroid::planner
