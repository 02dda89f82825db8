#pragma once

#include <string>

#include "asteroid/planner/planner.hpp"

namespace asteroid::planner {

/// The best single device (fastest that fits) with the best micro-batch
/// count (gradient accumulation): every speedup is measured against it.
class on_device_planner : public planner_base {
public:
  plan make_plan(const model_profile& profile, const cluster& c,
                 int64_t batch_size) override;
  std::string name() const override { return "on-device"; }
};

/// Data parallelism over all devices, whole model on each.
///
/// `proportional = false`: equal shares ("dp-even"); true: Algorithm 1
/// shares ("dp-proportional"). The micro-batch count (gradient
/// accumulation) is the fastest one that fits among those whose
/// micro-batch has at least one sample per device (every device computes;
/// infeasible when the batch is smaller than the device count). A device
/// Algorithm 1 leaves without samples (one would make it the straggler) is
/// left out of the dp-proportional group.
class data_parallel_planner : public planner_base {
public:
  explicit data_parallel_planner(bool proportional) : proportional_(proportional) {}
  plan make_plan(const model_profile& profile, const cluster& c,
                 int64_t batch_size) override;
  std::string name() const override {
    return proportional_ ? "dp-proportional" : "dp-even";
  }

private:
  bool proportional_;
};

/// GPipe-style pipeline: one device per stage in cluster order, as many
/// stages as devices (or layers), layers balanced by profiled time
/// (heterogeneity ignored), the fastest micro-batch count that fits.
class gpipe_planner : public planner_base {
public:
  plan make_plan(const model_profile& profile, const cluster& c,
                 int64_t batch_size) override;
  std::string name() const override { return "pp"; }
};

/// PipeDream's planner (docs/planner.md, Baselines): A[j][m] over layer prefixes and
/// machine counts assuming homogeneous devices (mean speed) and one
/// bandwidth B (the slowest link), replicated stage time
/// (T + 4(m-1)W/(B m)) / m, and the transfer into a stage of m' replicas
/// 2 a / (B m') as in PipeDream's optimizer; groups are taken in cluster
/// order with equal shares; evaluated under our cost model with the best
/// fitting M. Departure: a stage has at most as many replicas as a
/// micro-batch has samples (here replicas split a micro-batch, PipeDream
/// gives them whole ones in turn), so with small micro-batches it may use
/// fewer than all machines.
class pipedream_planner : public planner_base {
public:
  plan make_plan(const model_profile& profile, const cluster& c,
                 int64_t batch_size) override;
  std::string name() const override { return "pipedream"; }
};

/// FTPipeHD's partition DP (docs/planner.md, Baselines): one device per stage in
/// cluster order, dp[j][s] = min_i max(dp[i][s-1], 2*out[i]/bw,
/// (F+B)(i+1..j) * c_s) with c_s = 1/speed. Extended with our memory
/// constraint so it returns trainable plans.
class ftpipehd_planner : public planner_base {
public:
  plan make_plan(const model_profile& profile, const cluster& c,
                 int64_t batch_size) override;
  std::string name() const override { return "ftpipehd"; }
};

/// PipeEdge's DP (docs/planner.md, Baselines) over (layers placed, multiset of device
/// types used, type of the next stage): one device per stage, minimise the
/// slowest compute or communication stage subject to memory. Device types
/// are groups of devices with equal type, speed and budget. Throws when the
/// multiset space exceeds 2^22 states.
class pipeedge_planner : public planner_base {
public:
  plan make_plan(const model_profile& profile, const cluster& c,
                 int64_t batch_size) override;
  std::string name() const override { return "pipeedge"; }
};

} // namespace asteroid::planner
