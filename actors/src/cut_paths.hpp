#pragma once
// Devices lost because a path to them failed (unreachable_reports.hpp)
// while they still answer heartbeats, and when to probe each path again.
// Why: taken back on its heartbeats alone such a device would stall the
// job on the same path until lost again; left out for good, a path that
// heals (a Wi-Fi hiccup longer than the path window) costs the job a device
// for the rest of its run. A probe over the failed path decides, tried
// again with a doubling wait while it fails.
#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

namespace asteroid::actors::detail {

class cut_paths {
public:
  using clock = std::chrono::steady_clock;
  using milliseconds = std::chrono::milliseconds;

  /// The wait before the first probe, and the most any wait grows to.
  explicit cut_paths(milliseconds first_wait = milliseconds(1000),
                     milliseconds longest_wait = milliseconds(30000))
    : first_wait_(first_wait), longest_wait_(longest_wait) {}

  struct probe {
    int device = -1; ///< the device lost for the path
    int other = -1;  ///< the node at the path's other end, which probes it
  };

  /// `device` was lost for its path to `other`, now.
  void add(int device, int other, clock::time_point now) {
    paths_[device] = {other, now + first_wait_, first_wait_, false};
  }

  /// Never probed again (the program removed it).
  void forget(int device) { paths_.erase(device); }

  bool contains(int device) const { return paths_.count(device) > 0; }

  /// The probes due now, marked under way; none for a path whose other end
  /// is `lost` (nobody is left to probe it from).
  std::vector<probe> due(clock::time_point now, const std::set<int>& lost) {
    std::vector<probe> out;
    for (auto& [d, p] : paths_)
      if (!p.probing && now >= p.next && !lost.count(p.other)) {
        p.probing = true;
        out.push_back({d, p.other});
      }
    return out;
  }

  /// A probe of `device`'s path ended: answered, it is forgotten and its
  /// other end returned; else it is tried again after twice the last wait
  /// (at most `longest_wait`). -1 when `device` is not (or no longer) held.
  int ended(int device, bool answered, clock::time_point now) {
    auto it = paths_.find(device);
    if (it == paths_.end())
      return -1;
    const int other = it->second.other;
    if (answered) {
      paths_.erase(it);
      return other;
    }
    auto& p = it->second;
    p.wait = std::min(longest_wait_, p.wait * 2);
    p.next = now + p.wait;
    p.probing = false;
    return -1;
  }

private:
  struct path {
    int other = -1;
    clock::time_point next;
    milliseconds wait;
    bool probing = false;
  };
  milliseconds first_wait_, longest_wait_;
  std::map<int, path> paths_;
};

/// Where probes running on helper actors leave their outcome (device,
/// answered) for the step driver to take at a step boundary; a message
/// would be dropped by a step's receive loop.
struct probe_outcomes {
  std::mutex mutex;
  std::vector<std::pair<int, bool>> ended;

  void put(int device, bool answered) {
    std::lock_guard<std::mutex> lock(mutex);
    ended.emplace_back(device, answered);
  }
  std::vector<std::pair<int, bool>> take() {
    std::lock_guard<std::mutex> lock(mutex);
    return std::exchange(ended, {});
  }
};

} // namespace asteroid::actors::detail
