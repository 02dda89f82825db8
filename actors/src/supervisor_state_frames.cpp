// Supervisor: stage states this process holds (the model at a first
// deployment, a checkpoint, a state gathered or fetched) sent to the nodes
// as data-plane frames, which they keep as snapshots to rebuild from.
#include "supervisor.hpp"

#include <spdlog/spdlog.h>

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
  if (targets.empty() || !plane())
    return {};
  const auto t_begin = clock::now();
  std::map<int, std::pair<int, int>> sent;
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
                 ->send(self_, std::move(m));
    if (err.empty())
      sent[t.device] = {st.first_layer, st.end_layer};
    else
      spdlog::warn("stage {}'s state to node {} over the data plane: {} (shipped over CAF "
                   "instead)",
                   t.stage, who(t.device), err);
  }
  auto out = await_snapshots(sent, version, t_begin + timeout);
  for (const auto& [d, range] : sent)
    if (!out.count(d))
      spdlog::warn("the state of layers {}-{} sent to node {} over the data plane did not "
                   "arrive within {} ms (shipped over CAF instead)",
                   range.first, range.second, who(d), timeout.count());
  spdlog::info("sent {} stage states ({:.1f} MB) to their nodes over the data plane in "
               "{:.3f} s",
               out.size(), static_cast<double>(bytes) / 1e6,
               seconds_between(t_begin, clock::now()));
  return out;
}

} // namespace asteroid::actors::detail
