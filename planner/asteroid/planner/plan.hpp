#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace asteroid::planner {

/// One pipeline stage: a contiguous layer range run data-parallel on a group.
struct stage_plan {
  /// First layer of the stage (inclusive).
  int first_layer = 0;
  /// One past the last layer of the stage.
  int end_layer = 0;
  /// Device indices (into the cluster) of the stage's group.
  std::vector<int> devices;
  /// Samples of each micro-batch computed by `devices[i]`; sums to the
  /// micro-batch size.
  std::vector<int64_t> shares;
};

/// A complete hybrid-pipeline plan, as produced by any planner.
struct plan {
  /// Which planner made it ("asteroid", "dp", "pp", "pipedream", ...).
  std::string planner;
  int64_t batch_size = 0;
  /// Micro-batches per mini-batch; `batch_size` is a multiple of it.
  int micro_batches = 1;
  std::vector<stage_plan> stages;

  /// Predictions of the cost model (0 when unknown): the closed-form round
  /// latency (`round_latency`), which the planners optimise.
  double predicted_round_s = 0.0;
  double predicted_samples_per_s = 0.0;
  /// The plan's 1F1B instruction streams simulated on the same compute and
  /// all-reduce times (`simulate`, the cluster's link model), each stage
  /// boundary priced as the runtime sends it (`boundary_pricing::pieces`):
  /// closer to a run than the closed form where a pipeline has few
  /// micro-batches or groups on both sides of a boundary (docs/planner.md,
  /// "Two predictions"). 0 when unknown.
  double simulated_round_s = 0.0;
  double simulated_samples_per_s = 0.0;
  /// Predicted peak memory, indexed by cluster device (0 for unused ones).
  std::vector<int64_t> predicted_memory_bytes;

  int64_t micro_batch_size() const { return batch_size / micro_batches; }
  int num_stages() const { return static_cast<int>(stages.size()); }
  /// Distinct devices the plan computes on.
  int num_devices() const {
    std::set<int> used;
    for (const auto& st : stages)
      used.insert(st.devices.begin(), st.devices.end());
    return static_cast<int>(used.size());
  }
};

} // namespace asteroid::planner
