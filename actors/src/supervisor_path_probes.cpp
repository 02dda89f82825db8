// Supervisor: probing failed paths again, so that a device lost for one
// comes back once it heals (cut_paths.hpp).
#include "supervisor.hpp"

#include "asteroid/actors/remote_probe.hpp"

#include <spdlog/spdlog.h>

namespace asteroid::actors::detail {

void supervisor::probe_cut_paths() {
  const auto now = clock::now();
  for (auto [d, answered] : probe_outcomes_->take()) {
    const int other = cut_paths_.ended(d, answered, now);
    if (other < 0)
      continue;
    // Back in the job at rejoin, which re-plans with it as with any device
    // that answers again.
    removed_.erase(d);
    returned_.insert(d);
    fault_event("path_healed", {{"node", name_of(d)}, {"probed_from", name_of(other)}}, d);
  }
  for (const auto& p : cut_paths_.due(now, dead_)) {
    // Over the path that failed, the way tensors take it (the data plane):
    // the probe's frames go from `other` to the device and its echoes back
    // on the same connection (a stream of one 16 KiB frame, twice, and a
    // tiny round trip). A helper actor waits for it (at most the request's
    // timeout, 4 x 500 ms) while the steps go on; the job's end waits for a
    // probe under way.
    link_probe_options o;
    o.bytes = int64_t{16} << 10;
    o.stream = 1;
    o.timeout = milliseconds(500);
    o.path = probe_data_plane;
    auto from = devices_[p.other];
    auto to = nodes_[p.device];
    auto outcomes = probe_outcomes_;
    const int d = p.device;
    auto label = name_of(p.device) + " from " + name_of(p.other);
    self_->spawn<caf::detached>([from, to, o, outcomes, d, label](caf::blocking_actor* h) {
      bool answered = true;
      try {
        measure_link(h->system(), from, to, o);
      } catch (const std::exception& e) {
        answered = false;
        spdlog::debug("probing the path to {}: {}", label, e.what());
      }
      outcomes->put(d, answered);
    });
  }
}

} // namespace asteroid::actors::detail
