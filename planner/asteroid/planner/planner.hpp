#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "asteroid/planner/cluster.hpp"
#include "asteroid/planner/model_profile.hpp"
#include "asteroid/planner/plan.hpp"

namespace asteroid::planner {

/// Common interface of every planner (Asteroid and the baselines).
///
/// `make_plan` returns a plan that passes `validate`, has its predicted
/// fields filled by `evaluate` (our cost model, whatever the planner's own
/// objective) and fits every device's memory budget; it throws
/// `planner_error` when it cannot find such a plan. Device speeds in the
/// cluster must be relative to the profile's device (see `rebase_speeds`).
class planner_base {
public:
  virtual ~planner_base() = default;
  virtual plan make_plan(const model_profile& profile, const cluster& c,
                         int64_t batch_size) = 0;
  virtual std::string name() const = 0;
};

/// A planner by name: "asteroid", "on-device", "dp-even", "dp-proportional",
/// "pp", "pipedream", "ftpipehd", "pipeedge", "exhaustive". Throws
/// `planner_error` listing the names for anything else.
std::unique_ptr<planner_base> make_planner(const std::string& name);

/// The names `make_planner` accepts, Asteroid first.
std::vector<std::string> planner_names();

/// Micro-batch counts tried by the planners: the divisors of `batch_size`.
std::vector<int> micro_batch_candidates(int64_t batch_size);

} // namespace asteroid::planner
