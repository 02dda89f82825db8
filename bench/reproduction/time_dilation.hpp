#pragma once
// Time dilation for emulated clusters on a small machine (docs/benchmarks.md,
// "Time dilation"): with factor D, device i computes at (its speed / D) of
// this machine (node slowdown D / speed_i, the fastest device's speed being
// 1) and every link runs at (its rate / D). Emulated time = wall time / D.
// D is chosen so that the devices' compute, if all were busy at once, needs
// at most `cpu_budget` cores: sum_i speed_i / D <= cpu_budget.
#include <algorithm>
#include <numeric>
#include <vector>

namespace asteroid::bench {

inline double auto_dilation(const std::vector<double>& speeds_rel_fastest,
                            double cpu_budget) {
  double demand = std::accumulate(speeds_rel_fastest.begin(),
                                  speeds_rel_fastest.end(), 0.0);
  return std::max(1.0, demand / cpu_budget);
}

} // namespace asteroid::bench
