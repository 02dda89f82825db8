#include "asteroid/planner/co_location.hpp"

#include <optional>

#include "asteroid/planner/baselines.hpp"
#include "asteroid/planner/cost_model.hpp"
#include "asteroid/planner/error.hpp"

namespace asteroid::planner {

namespace {

/// `c` as every plan of two or more devices sees it.
cluster as_co_located(const cluster& c) {
  cluster shared = c;
  for (auto& d : shared.devices)
    d.speed /= c.co_location_slowdown;
  shared.co_location_slowdown = 1.0;
  return shared;
}

} // namespace

plan plan_co_located(const model_profile& profile, const cluster& c, int64_t batch_size,
                     const std::string& name,
                     const std::function<plan(const cluster&)>& search) {
  if (c.co_location_slowdown == 1.0)
    return search(c);
  // The search over-prices its one-device plans by the factor; those are
  // the on-device planner's to find, priced on `c`.
  std::optional<plan> shared;
  std::optional<planner_error> search_failed;
  try {
    shared = search(as_co_located(c));
    evaluate(*shared, profile, c);
  } catch (const planner_error& e) {
    search_failed = e;
  }
  std::optional<plan> alone;
  try {
    alone = on_device_planner().make_plan(profile, c, batch_size);
  } catch (const planner_error&) {
    if (search_failed)
      throw *search_failed;
  }
  const bool alone_wins =
    !shared || (alone && alone->predicted_samples_per_s > shared->predicted_samples_per_s);
  plan best = alone_wins ? std::move(*alone) : std::move(*shared);
  best.planner = name;
  return best;
}

} // namespace asteroid::planner
