#include "snapshot_copies.hpp"

#include "asteroid/actors/snapshot_store.hpp"

#include <limits>
#include <set>

namespace asteroid::actors::detail {

namespace {

/// The layer ranges `inventory` holds at `version`.
std::set<std::pair<int, int>> ranges_at(const nlohmann::json& inventory, int64_t version) {
  std::set<std::pair<int, int>> out;
  if (!inventory.is_object())
    return out;
  for (auto& [key, versions] : inventory.items()) {
    int a = 0, b = 0;
    if (!snapshot_store::parse_key(key, a, b) || !versions.is_array())
      continue;
    for (auto& v : versions)
      if (v.is_number_integer() && v.get<int64_t>() == version)
        out.insert({a, b});
  }
  return out;
}

std::string key_of(int first, int end) {
  return "L" + std::to_string(first) + "-" + std::to_string(end);
}

} // namespace

std::vector<snapshot_copy> plan_snapshot_copies(const std::vector<snapshot_need>& needs,
                                                const std::map<int, nlohmann::json>& inventories,
                                                int64_t version) {
  std::map<int, std::set<std::pair<int, int>>> held;
  for (auto& [d, inv] : inventories)
    held[d] = ranges_at(inv, version);
  std::map<int, int> load; // copies each holder sends
  std::vector<snapshot_copy> out;
  std::set<std::pair<int, std::pair<int, int>>> planned; // (target, range)
  for (const auto& need : needs) {
    if (need.end_layer <= need.first_layer)
      continue;
    const auto& own = held[need.device];
    std::set<std::pair<int, int>> others;
    for (auto& [d, ranges] : held)
      if (d != need.device)
        others.insert(ranges.begin(), ranges.end());
    // Ranges only go forward, so the cheapest tiling of [first, end) is a
    // shortest path over layer boundaries in increasing order. A range the
    // device holds costs nothing; one held elsewhere costs its layers (what
    // crosses a link), then one copy (a tie goes to fewer frames).
    using price = std::pair<int, int>; // layers copied, copies
    const int first = need.first_layer, end = need.end_layer;
    const price unreached{std::numeric_limits<int>::max(), 0};
    std::vector<price> cost(end - first + 1, unreached);
    std::vector<std::pair<int, int>> via(end - first + 1, {-1, -1});
    std::vector<bool> copied(end - first + 1, false);
    cost[0] = {0, 0};
    for (int at = first; at < end; ++at) {
      if (cost[at - first] == unreached)
        continue;
      auto relax = [&](const std::set<std::pair<int, int>>& ranges, bool copy) {
        for (auto it = ranges.lower_bound({at, at}); it != ranges.end() && it->first == at;
             ++it) {
          if (it->second > end)
            continue;
          price p = cost[at - first];
          if (copy) {
            p.first += it->second - it->first;
            p.second += 1;
          }
          auto& c = cost[it->second - first];
          if (p < c) {
            c = p;
            via[it->second - first] = *it;
            copied[it->second - first] = copy;
          }
        }
      };
      relax(own, false);
      relax(others, true);
    }
    if (cost[end - first] == unreached || cost[end - first].second == 0)
      continue;
    for (int at = end; at > first;) {
      auto range = via[at - first];
      if (copied[at - first] && planned.insert({need.device, range}).second) {
        int holder = -1;
        for (auto& [d, ranges] : held)
          if (d != need.device && ranges.count(range)
              && (holder < 0 || load[d] < load[holder]))
            holder = d;
        ++load[holder];
        out.push_back({holder, need.device, key_of(range.first, range.second)});
      }
      at = range.first;
    }
  }
  return out;
}

} // namespace asteroid::actors::detail
