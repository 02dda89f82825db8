#pragma once
/// \file
/// A plan written out rather than planned: by hand, by a test, by a benchmark.
#include "asteroid/planner/plan.hpp"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace asteroid::planner {

/// `micro_batches` micro-batches of `batch` samples through `stages`;
/// `made_by` is recorded as the plan's planner. Its predictions stay 0
/// until `evaluate` fills them.
inline plan given_plan(std::string made_by, int64_t batch, int micro_batches,
                       std::vector<stage_plan> stages) {
  plan p;
  p.planner = std::move(made_by);
  p.batch_size = batch;
  p.micro_batches = micro_batches;
  p.stages = std::move(stages);
  return p;
}

} // namespace asteroid::planner
