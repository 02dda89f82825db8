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
  /// Suffix plans kept per DP state: the fastest one and a Pareto set of
  /// the others (see docs/planner.md). 16 finds the exhaustive optimum on
  /// all 64 paper instances (environments A-D x 2 links x 4 models x batch
  /// 16 and 32); 4 missed 12 of them by up to 2.1 %, and plans ResNet-50 on
  /// 16 and 32 devices about 1.8x faster. At least 2.
  int suffixes_per_state = 16;
  /// Largest stage count tried (0 = min(layers, devices)).
  int max_stages = 0;
  /// Largest micro-batch count tried (0 = every divisor of the batch size).
  int max_micro_batches = 0;
  /// A search that `estimated_search_seconds` puts over this many seconds
  /// is refused before it starts, saying so (0: no limit).
  double max_search_seconds = 120;
};

/// A rough time for `asteroid_planner` to plan `layers` layers on
/// `devices` devices trying `micro_batch_counts` micro-batch counts, on a
/// 2-core x86 host. Its search grows as devices^3.5 x layers^2 x micro-batch
/// counts: fitted to runs of a 4-layer and a 20-layer model on 20 to 200
/// devices of distinct speeds (docs/planner.md), within a third there. An
/// estimate to refuse hopeless sizes up front, not a promise: a slower host
/// takes longer, and devices that are alike shorten the search.
double estimated_search_seconds(int devices, int layers, int micro_batch_counts);

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
