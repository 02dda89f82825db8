// Supervisor: a recovery's or re-plan's states from the nodes' snapshots, copied from
// node to node where they can be (snapshot_copies.hpp).
#include "supervisor.hpp"
#include "supervisor_ask.hpp"

#include "snapshot_copies.hpp"

#include <spdlog/spdlog.h>


namespace asteroid::actors::detail {

int supervisor::copy_snapshots(const planner::plan& next, state_source& src) {
  if (src.version < 0)
    return 0;
  // Both ends need a data plane: the copy is one frame from the holder's
  // plane to the target's.
  std::map<int, json> reachable;
  for (auto& [d, inv] : src.inventories)
    if (!data_endpoint(d).empty())
      reachable[d] = inv;
  std::vector<snapshot_need> needs;
  for (const auto& st : next.stages)
    for (int d : st.devices)
      if (reachable.count(d))
        needs.push_back({d, st.first_layer, st.end_layer});
  auto copies = plan_snapshot_copies(needs, reachable, src.version);
  if (copies.empty())
    return 0;
  const auto t_begin = clock::now();
  const auto timeout = milliseconds(job_.step_timeout_ms);
  std::set<int> targets, refused;
  for (const auto& c : copies) {
    auto what = "copying snapshot " + c.key + " from node " + who(c.holder) + " to node "
                + who(c.target);
    auto reply = ask<std::string>(c.holder, devices_[c.holder], timeout, what,
                                  copy_atom::value, c.key, src.version,
                                  data_endpoint(c.target),
                                  static_cast<uint64_t>(devices_[c.target].id()));
    const auto& err = reply.get_as<std::string>(0);
    if (err.empty()) {
      targets.insert(c.target);
    } else {
      spdlog::warn("{}: {} (its state is shipped instead)", what, err);
      refused.insert(c.target);
    }
  }
  for (int d : refused)
    targets.erase(d);
  std::map<int, std::pair<int, int>> range_of;
  for (const auto& st : next.stages)
    for (int d : st.devices)
      if (targets.count(d))
        range_of[d] = {st.first_layer, st.end_layer};
  int arrived = 0;
  for (auto& [d, inv] : await_snapshots(range_of, src.version, t_begin + timeout)) {
    for (const auto& c : copies)
      arrived += c.target == d;
    src.inventories[d] = std::move(inv);
    targets.erase(d);
  }
  for (int d : targets)
    spdlog::warn("the snapshots copied to node {} did not arrive within {} ms (its "
                 "state is shipped instead)",
                 who(d), timeout.count());
  spdlog::info("copied {} of {} snapshots node to node in {:.3f} s", arrived, copies.size(),
               seconds_between(t_begin, clock::now()));
  return arrived;
}

int supervisor::state_from_snapshots(const planner::plan& next, state_source& src) {
  const int copied = copy_snapshots(next, src);
  for (const auto& st : next.stages)
    for (int d : st.devices) {
      auto inv = src.inventories.find(d);
      if (inv == src.inventories.end()
          || !tiles(inv->second, st.first_layer, st.end_layer, src.version)) {
        src.full = fetch_full_state(src.inventories, src.version);
        return copied;
      }
    }
  return copied;
}

std::map<int, json> supervisor::await_snapshots(
  const std::map<int, std::pair<int, int>>& wanted, int64_t version,
  clock::time_point deadline) {
  std::map<int, json> out;
  auto waiting = wanted;
  const auto timeout = milliseconds(job_.step_timeout_ms);
  for (;;) {
    for (auto it = waiting.begin(); it != waiting.end();) {
      const int d = it->first;
      auto reply = ask<inventory_atom, int32_t, std::string>(
        d, devices_[d], timeout, "asking node " + who(d) + " for its snapshots",
        inventory_atom::value, static_cast<int32_t>(d));
      auto inv = json::parse(reply.get_as<std::string>(2), nullptr, false);
      if (!inv.is_discarded() && tiles(inv, it->second.first, it->second.second, version)) {
        out[d] = std::move(inv);
        it = waiting.erase(it);
      } else {
        ++it;
      }
    }
    if (waiting.empty() || clock::now() >= deadline)
      return out;
    inbox_.pause(milliseconds(20));
  }
}

} // namespace asteroid::actors::detail
