#pragma once

#include <cstdint>
#include <string>

#include "asteroid/planner/planner.hpp"

namespace asteroid::planner {

/// Test oracle: the best plan over every stage cut, every assignment of
/// disjoint device groups to stages (devices may stay idle), and every
/// micro-batch count, with Algorithm 1 shares as in the DP.
///
/// Only for small instances: throws `planner_error` when the search would
/// exceed `max_evaluations` (layers <= 8 and devices <= 5 stay far below).
class exhaustive_planner : public planner_base {
public:
  explicit exhaustive_planner(int64_t max_evaluations = 50'000'000)
      : max_evaluations_(max_evaluations) {}
  plan make_plan(const model_profile& profile, const cluster& c,
                 int64_t batch_size) override;
  std::string name() const override { return "exhaustive"; }

private:
  /// The search itself, blind to `cluster::co_location_slowdown` (make_plan
  /// wraps it in `plan_co_located`).
  plan search(const model_profile& profile, const cluster& c, int64_t batch_size);

  int64_t max_evaluations_;
};

} // namespace asteroid::planner
