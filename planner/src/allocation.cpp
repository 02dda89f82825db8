#include "asteroid/planner/allocation.hpp"

#include <algorithm>

namespace asteroid::planner {

int64_t max_share_by_search(int64_t limit, int64_t budget,
                            const std::function<int64_t(int64_t)>& memory) {
  if (memory(0) > budget)
    return -1;
  int64_t lo = 0; // fits
  int64_t hi = limit;
  if (memory(hi) <= budget)
    return hi;
  // Invariant: memory(lo) fits, memory(hi) does not.
  while (hi - lo > 1) {
    int64_t mid = lo + (hi - lo) / 2;
    if (memory(mid) <= budget)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

share_allocation allocate_shares(
  int64_t total, const std::vector<double>& speeds, const std::vector<int64_t>& caps,
  const std::function<std::pair<double, double>(int64_t)>& ref_time) {
  share_allocation out;
  const int g = static_cast<int>(speeds.size());
  int64_t cap_sum = 0;
  for (int i = 0; i < g; ++i) {
    if (caps[i] < 0) {
      out.tightest = i;
      return out;
    }
    cap_sum += std::min(caps[i], total);
  }
  if (g == 0 || cap_sum < total)
    return out;
  std::vector<int64_t> clamped(caps.size());
  for (int i = 0; i < g; ++i)
    clamped[i] = std::min(caps[i], total);
  detail::allocate_shares(total, speeds.data(), clamped.data(), g, ref_time, out);
  return out;
}

share_allocation allocate_stage(const cost_tables& t, const cluster& c, int first, int end,
                                const std::vector<int>& devices, int64_t micro, int in_flight) {
  share_allocation out;
  const int g = static_cast<int>(devices.size());
  std::vector<double> speeds(g);
  std::vector<int64_t> caps(g);
  int64_t cap_sum = 0;
  for (int i = 0; i < g; ++i) {
    const auto& d = c.devices[devices[i]];
    speeds[i] = d.speed;
    caps[i] = t.max_share_within(first, end, in_flight, d.memory_bytes, micro);
    if (caps[i] < 0) {
      out.tightest = i;
      out.shortfall_bytes = t.fixed_bytes(first, end) - d.memory_bytes;
      return out;
    }
    cap_sum += caps[i];
  }
  if (g == 0)
    return out;
  if (cap_sum < micro) {
    // Name the member whose proportional share overshoots its memory most.
    double vsum = 0.0;
    for (double s : speeds)
      vsum += s;
    for (int i = 0; i < g; ++i) {
      auto want = static_cast<int64_t>(static_cast<double>(micro) * speeds[i] / vsum + 0.999999);
      auto need = t.memory_bytes(first, end, std::max<int64_t>(want, caps[i] + 1), in_flight);
      auto lack = need - c.devices[devices[i]].memory_bytes;
      if (out.tightest < 0 || lack > out.shortfall_bytes) {
        out.tightest = i;
        out.shortfall_bytes = lack;
      }
    }
    return out;
  }
  auto ref = [&](int64_t y) {
    return std::make_pair(t.forward_s(first, end, y), t.backward_s(first, end, y));
  };
  detail::allocate_shares(micro, speeds.data(), caps.data(), g, ref, out);
  return out;
}

} // namespace asteroid::planner
