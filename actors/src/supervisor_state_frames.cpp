// Supervisor: stage states this process holds (the model at a first
// deployment, a checkpoint, a state gathered or fetched) sent to the nodes
// as data-plane frames, which they keep as snapshots to rebuild from.
#include "supervisor.hpp"
#include "supervisor_ask.hpp"

#include <spdlog/spdlog.h>

#include <thread>

namespace asteroid::actors::detail {

std::shared_ptr<data_plane> supervisor::plane() {
  if (plane_ || plane_failed_)
    return plane_;
  data_plane::options o;
  // It only sends (the nodes acknowledge on the connections it opens), so
  // it listens on loopback and turns away every connection made to it.
  o.host = "127.0.0.1";
  o.max_incoming = 0;
  if (uses_tls(sys_)) {
    const auto& cfg = sys_.config();
    o.tls.ca = cfg.openssl_cafile;
    o.tls.cert = cfg.openssl_certificate;
    o.tls.key = cfg.openssl_key;
  }
  try {
    plane_ = data_plane::start(o);
  } catch (const std::exception& e) {
    plane_failed_ = true;
    spdlog::warn("no data plane in the supervisor's process ({}): stage states go to "
                 "the nodes over CAF",
                 e.what());
  }
  return plane_;
}

std::map<int, json> supervisor::send_states(
  const planner::plan& p, const state_source& src, int64_t version,
  const std::vector<std::vector<bool>>& keep,
  const std::function<const std::string&(int)>& state_of, milliseconds timeout) {
  struct target {
    int stage, device;
  };
  std::vector<target> targets;
  for (int s = 0; s < p.num_stages(); ++s) {
    const auto& st = p.stages[s];
    const auto key = range_key(st.first_layer, st.end_layer);
    for (size_t r = 0; r < st.devices.size(); ++r) {
      const int d = st.devices[r];
      if (keep[s][r])
        continue; // its replica stays, with its state
      auto inv = src.inventories.find(d);
      if (inv != src.inventories.end()) {
        if (src.version >= 0 && tiles(inv->second, st.first_layer, st.end_layer, src.version))
          continue; // it rebuilds from its node's snapshots as they are
        // A node that keeps newer versions of this range could drop the
        // one sent at once (it keeps the newest few): shipped instead.
        bool newer = false;
        if (inv->second.contains(key))
          for (auto& v : inv->second[key])
            newer = newer || (v.is_number_integer() && v.get<int64_t>() > version);
        if (newer)
          continue;
      }
      if (!data_endpoint(d).empty())
        targets.push_back({s, d});
    }
  }
  std::map<int, json> out;
  if (targets.empty() || !plane())
    return out;
  const auto t_begin = clock::now();
  std::vector<target> waiting;
  int64_t bytes = 0;
  for (const auto& t : targets) {
    const auto& st = p.stages[t.stage];
    serialization::tensor_message m;
    m.kind = serialization::tensor_kind::snapshot;
    m.job = job_id_;
    m.step = version;
    m.key = range_key(st.first_layer, st.end_layer);
    m.payload = state_of(t.stage);
    bytes += static_cast<int64_t>(m.payload.size());
    auto err = make_tcp_channel(plane_, data_endpoint(t.device),
                                static_cast<uint64_t>(devices_[t.device].id()))
                 ->send(self_.ptr(), std::move(m));
    if (err.empty())
      waiting.push_back(t);
    else
      spdlog::warn("stage {}'s state to node {} over the data plane: {} (shipped over CAF "
                   "instead)",
                   t.stage, who(t.device), err);
  }
  // The frames travel on the data plane, the question whether they arrived
  // on CAF: ask each node until it holds its range.
  const auto deadline = t_begin + timeout;
  for (;;) {
    for (auto it = waiting.begin(); it != waiting.end();) {
      const auto& st = p.stages[it->stage];
      const int d = it->device;
      auto reply = ask<inventory_atom, int32_t, std::string>(
        d, devices_[d], timeout, "asking node " + who(d) + " for its snapshots",
        inventory_atom::value, static_cast<int32_t>(d));
      auto inv = json::parse(reply.get_as<std::string>(2), nullptr, false);
      if (!inv.is_discarded() && tiles(inv, st.first_layer, st.end_layer, version)) {
        out[d] = std::move(inv);
        it = waiting.erase(it);
      } else {
        ++it;
      }
    }
    if (waiting.empty() || clock::now() >= deadline)
      break;
    std::this_thread::sleep_for(milliseconds(20));
  }
  for (const auto& t : waiting)
    spdlog::warn("stage {}'s state sent to node {} over the data plane did not arrive "
                 "within {} ms (shipped over CAF instead)",
                 t.stage, who(t.device), timeout.count());
  spdlog::info("sent {} stage states ({:.1f} MB) to their nodes over the data plane in "
               "{:.3f} s",
               targets.size() - waiting.size(), static_cast<double>(bytes) / 1e6,
               seconds_between(t_begin, clock::now()));
  return out;
}

} // namespace asteroid::actors::detail
