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
    // Over the path that failed, the way tensors take it (path_answers): a
    // helper actor waits for it while the steps go on; the job's end waits
    // for a probe under way.
    auto from = devices_[p.other];
    auto to = nodes_[p.device];
    auto outcomes = probe_outcomes_;
    const int d = p.device;
    auto label = name_of(p.device) + " from " + name_of(p.other);
    self_->spawn<caf::detached>([from, to, outcomes, d, label](caf::blocking_actor* h) {
      std::string why;
      const bool answered = path_answers(h->system(), from, to, &why);
      if (!answered)
        spdlog::debug("probing the path to {}: {}", label, why);
      outcomes->put(d, answered);
    });
  }
}

} // namespace asteroid::actors::detail
