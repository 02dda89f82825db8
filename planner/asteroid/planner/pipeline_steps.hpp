#pragma once

#include <vector>

namespace asteroid::planner {

/// One step of the 2P-1 step pipeline model of a plan (DAPPLE-style).
///
/// Compute steps (stage p) and communication steps (boundary between stage p
/// and p+1) alternate. Times are per micro-batch. For a compute step,
/// `device_forward_s[i]` / `device_backward_s[i]` are the times of
/// `devices[i]` on its share; `forward_s` / `backward_s` are their maxima. A
/// communication step has no devices and its times are the transfer times of
/// the boundary activation (forward) and its gradient (backward).
struct pipeline_step {
  enum class kind { compute, communication };
  kind type = kind::compute;
  /// Stage index for compute steps; index of the upstream stage otherwise.
  int stage = 0;
  double forward_s = 0.0;
  double backward_s = 0.0;
  /// Ring all-reduce time at the end of the mini-batch (compute steps only).
  double allreduce_s = 0.0;
  /// What the slowest replica computes once per mini-batch besides its
  /// micro-batches (cost_tables::update_s: the optimizer's step), after the
  /// all-reduce.
  double update_s = 0.0;
  std::vector<int> devices;
  std::vector<double> device_forward_s;
  std::vector<double> device_backward_s;
  /// Each device's `update_s` (empty: every replica takes `update_s`).
  std::vector<double> device_update_s;

  /// The stage's time after its last backward: all-reduce, then update.
  double end_of_round_s() const { return allreduce_s + update_s; }
};

/// The cost model's view of a plan: its steps plus the micro-batch count.
struct pipeline_steps {
  std::vector<pipeline_step> steps;
  int micro_batches = 1;
  /// The cluster's full_duplex_links: a communication step's forward and
  /// backward transfers overlap.
  bool full_duplex_links = false;
};

} // namespace asteroid::planner
