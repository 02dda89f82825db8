#pragma once

#include "asteroid/planner/cluster.hpp"
#include "asteroid/planner/plan.hpp"

namespace asteroid::planner {

/// Checks a plan's structure against a model of `num_layers` layers and a
/// cluster; throws `planner_error` naming the stage, layer or device.
///
/// Checks: batch size a positive multiple of the micro-batch count; stages
/// non-empty, contiguous and covering layers [0, num_layers); each group
/// non-empty with one non-negative share per device summing to the
/// micro-batch size; device indices exist and each device is in at most one
/// stage. Memory is not checked here (see `evaluate` / `check_memory`).
void validate(const plan& p, int num_layers, const cluster& c);

} // namespace asteroid::planner
