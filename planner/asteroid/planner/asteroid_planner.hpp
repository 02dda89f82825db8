#pragma once

#include <string>
#include <vector>

#include "asteroid/planner/planner.hpp"

namespace asteroid::planner {

/// Knobs of the Asteroid DP planner.
struct asteroid_options {
  /// Device orderings tried, among "memory" (budget desc, then speed),
  /// "speed" (speed desc, then budget), "speed-asc", "memory-asc",
  /// "cluster" (file order) and "bandwidth" (greedy chain of the fastest
  /// links from the fastest device). The best plan over all wins.
  std::vector<std::string> orderings = {"memory", "speed", "speed-asc", "cluster",
                                        "bandwidth"};
  /// When the cluster has at most this many distinct device orderings
  /// (interchangeable devices counted once), the DP runs on every one of
  /// them instead of `orderings` + local search.
  int enumerate_orderings_up_to = 120;
  /// Passes of neighbour swaps from the best of `orderings` (each pass
  /// reruns the DP n-1 times with the best micro-batch count).
  int local_search_passes = 3;
  /// Largest stage count tried (0 = min(layers, devices)).
  int max_stages = 0;
  /// Largest micro-batch count tried (0 = every divisor of the batch size).
  int max_micro_batches = 0;
};

/// Algorithm 2: DP over (first layer, first device in the ordering, stages)
/// of the best suffix plan, per micro-batch count and device ordering.
///
/// Orderings: every distinct one when there are few (see
/// `asteroid_options::enumerate_orderings_up_to`), else the named
/// `orderings` followed by a neighbour-swap local search.
///
/// A head stage is layers [i, i') on a contiguous run of the ordering with
/// shares from Algorithm 1 and K = min(stages in the suffix, M) stashed
/// micro-batches; devices may be left idle. The suffix kept per state is
/// the one with the lowest round latency on its own plus a small Pareto set,
/// and the combined latency is computed exactly from a summary of the
/// suffix's steps (`pipeline_summary`, see docs/planner.md), so the DP is a
/// heuristic checked against `exhaustive_planner` in the tests.
class asteroid_planner : public planner_base {
public:
  explicit asteroid_planner(asteroid_options options = {});
  plan make_plan(const model_profile& profile, const cluster& c,
                 int64_t batch_size) override;
  std::string name() const override { return "asteroid"; }

  /// Device order for one of the ordering names above.
  static std::vector<int> device_order(const cluster& c, const std::string& ordering);

private:
  /// The search itself, blind to `cluster::co_location_slowdown` (make_plan
  /// wraps it in `plan_co_located`).
  plan search(const model_profile& profile, const cluster& c, int64_t batch_size);

  asteroid_options options_;
};

} // namespace asteroid::planner
