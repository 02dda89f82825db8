#pragma once

#include <cstdint>
#include <functional>

#include "asteroid/planner/cluster.hpp"
#include "asteroid/planner/model_profile.hpp"
#include "asteroid/planner/plan.hpp"

namespace asteroid::planner {

/// A search that prices compute by speeds alone (the DP, the exhaustive
/// enumeration) made aware of `cluster::co_location_slowdown`, which only
/// applies to plans that use more than one device: `search` runs on `c`
/// with every device `co_location_slowdown` times slower (and the factor
/// then 1), where every multi-device plan costs what the cost model says on
/// `c`, and the best one-device plan (the on-device planner's,
/// which does not pay the factor) is kept instead when it is predicted
/// faster. The result is evaluated on `c` and named `name`. With a slowdown
/// of 1 this is `search(c)`.
plan plan_co_located(const model_profile& profile, const cluster& c, int64_t batch_size,
                     const std::string& name,
                     const std::function<plan(const cluster&)>& search);

} // namespace asteroid::planner
