#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <utility>
#include <vector>

#include "asteroid/planner/cluster.hpp"
#include "asteroid/planner/cost_model.hpp"

namespace asteroid::planner {

/// Result of Algorithm 1 for one group: who computes how many samples.
struct share_allocation {
  bool feasible = false;
  /// Samples per group member, summing to the micro-batch size.
  std::vector<int64_t> shares;
  /// Largest forward / backward time over the group (seconds).
  double forward_s = 0.0;
  double backward_s = 0.0;
  /// When infeasible: the group member that lacks memory, and how much.
  int tightest = -1;
  int64_t shortfall_bytes = 0;
};

/// True when some member of a feasible allocation gets no sample. Planners
/// do not use such a group: a device either computes part of every
/// micro-batch or is not in the group, and the group without it computes
/// as fast with a cheaper all-reduce (plan validation refuses zero shares).
inline bool has_idle_member(const share_allocation& a) {
  return std::find(a.shares.begin(), a.shares.end(), int64_t{0}) != a.shares.end();
}

/// Largest y in [0, limit] with memory(y) <= budget by binary search
/// (memory must be non-decreasing); -1 when memory(0) > budget.
int64_t max_share_by_search(int64_t limit, int64_t budget,
                            const std::function<int64_t(int64_t)>& memory);

namespace detail {

/// Algorithm 1 core. `speeds[i]` scales member i's time: time_i(y) =
/// (ref_f(y) + ref_b(y)) / speeds[i]; `caps[i]` is its largest share (>= 0);
/// `ref(y)` returns {ref_f(y), ref_b(y)} on the profiling device.
template <class RefTime>
void allocate_shares(int64_t total, const double* speeds, const int64_t* caps,
                     int g, RefTime&& ref, share_allocation& out) {
  out.shares.assign(g, 0);
  out.feasible = true;
  out.tightest = -1;
  out.shortfall_bytes = 0;
  // Phase 1: water-filling proportional to capacity, clipped to the caps.
  // Capacity v_i = 1 / time_i(one sample's worth) is proportional to speed
  // because all members run the same layers.
  double xs[64];
  bool fixed[64];
  std::vector<double> xs_big;
  std::vector<char> fixed_big;
  double* x = xs;
  bool* fx = fixed;
  if (g > 64) {
    xs_big.resize(g);
    fixed_big.resize(g);
    x = xs_big.data();
    fx = reinterpret_cast<bool*>(fixed_big.data());
  }
  for (int i = 0; i < g; ++i)
    fx[i] = false;
  int64_t remaining = total;
  for (;;) {
    double vsum = 0.0;
    for (int i = 0; i < g; ++i)
      if (!fx[i])
        vsum += speeds[i];
    if (vsum <= 0.0)
      break;
    bool clipped = false;
    for (int i = 0; i < g; ++i) {
      if (fx[i])
        continue;
      x[i] = static_cast<double>(remaining) * speeds[i] / vsum;
      if (x[i] >= static_cast<double>(caps[i])) {
        fx[i] = true;
        out.shares[i] = caps[i];
        remaining -= caps[i];
        clipped = true;
      }
    }
    if (!clipped)
      break;
  }
  // Integer shares: floors, then the leftovers to the largest fractional
  // remainders among members with headroom (one each suffices because an
  // unclipped member has x < cap).
  int64_t assigned = 0;
  for (int i = 0; i < g; ++i) {
    if (!fx[i]) {
      out.shares[i] = static_cast<int64_t>(x[i]);
      if (out.shares[i] > caps[i])
        out.shares[i] = caps[i];
    }
    assigned += out.shares[i];
  }
  int64_t left = total - assigned;
  while (left > 0) {
    int best = -1;
    double best_frac = -1.0;
    for (int i = 0; i < g; ++i) {
      if (out.shares[i] >= caps[i])
        continue;
      double frac = fx[i] ? -0.5 : x[i] - static_cast<double>(out.shares[i]);
      if (frac > best_frac) {
        best_frac = frac;
        best = i;
      }
    }
    if (best < 0)
      break;
    ++out.shares[best];
    fx[best] = true; // at most one extra per member per pass
    --left;
  }
  // Phase 2: straggler offloading, one sample at a time from the slowest
  // member to the member that would be fastest with one more, while the
  // pair's max latency strictly drops (the sorted latency vector decreases
  // lexicographically, so this terminates).
  auto time_of = [&](int i, int64_t y) {
    if (y <= 0)
      return 0.0;
    auto fb = ref(y);
    return (fb.first + fb.second) / speeds[i];
  };
  double ts[64];
  std::vector<double> ts_big;
  double* t = ts;
  if (g > 64) {
    ts_big.resize(g);
    t = ts_big.data();
  }
  for (int i = 0; i < g; ++i)
    t[i] = time_of(i, out.shares[i]);
  for (int64_t iter = 0; iter < total * g + 1; ++iter) {
    int s = 0;
    for (int i = 1; i < g; ++i)
      if (t[i] > t[s])
        s = i;
    if (out.shares[s] == 0)
      break;
    int f = -1;
    double tf = std::numeric_limits<double>::infinity();
    for (int i = 0; i < g; ++i) {
      if (i == s || out.shares[i] >= caps[i])
        continue;
      double ti = time_of(i, out.shares[i] + 1);
      if (ti < tf) {
        tf = ti;
        f = i;
      }
    }
    if (f < 0)
      break;
    double ts_new = time_of(s, out.shares[s] - 1);
    if (!(std::max(tf, ts_new) < t[s]))
      break;
    --out.shares[s];
    ++out.shares[f];
    t[s] = ts_new;
    t[f] = tf;
  }
  double fmax = 0.0;
  double bmax = 0.0;
  for (int i = 0; i < g; ++i) {
    if (out.shares[i] <= 0)
      continue;
    auto fb = ref(out.shares[i]);
    fmax = std::max(fmax, fb.first / speeds[i]);
    bmax = std::max(bmax, fb.second / speeds[i]);
  }
  out.forward_s = fmax;
  out.backward_s = bmax;
}

} // namespace detail

/// Algorithm 1 on explicit inputs: shares of `total` samples for members
/// with `speeds` and memory `caps` (from `max_share_by_search`; -1 = cannot
/// host the stage at all). `ref_time(y)` = {forward, backward} seconds of
/// the stage at y samples on the profiling device. Infeasible when a cap is
/// -1 or the caps sum to less than `total` (no shortfall bytes are known
/// here: see `allocate_stage`).
share_allocation allocate_shares(
  int64_t total, const std::vector<double>& speeds, const std::vector<int64_t>& caps,
  const std::function<std::pair<double, double>(int64_t)>& ref_time);

/// Algorithm 1 for stage layers [first, end) on cluster devices `devices`
/// with `in_flight` stashed micro-batches: caps from each device's budget,
/// then shares. When infeasible, names the tightest member and the bytes it
/// lacks (for the whole group: the member whose proportional share exceeds
/// its cap the most).
share_allocation allocate_stage(const cost_tables& tables, const cluster& c,
                                int first, int end, const std::vector<int>& devices,
                                int64_t micro_batch_size, int in_flight);

} // namespace asteroid::planner
