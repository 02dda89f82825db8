// Inference server: probing failed paths again, so that a node lost for one
// is taken back once it heals (cut_paths.hpp), as a training job's
// supervisor does (supervisor_path_probes.cpp).
#include "server_state.hpp"

#include "asteroid/actors/remote_probe.hpp"

#include <spdlog/spdlog.h>

namespace asteroid::actors::serving {

void probe_cut_paths(server_self self, server_clock::time_point now) {
  auto& st = self->state;
  if (ended(st))
    return;
  if (st.phase == server_phase::serving)
    while (!st.healed.empty()) {
      auto [d, other] = *st.healed.begin();
      st.healed.erase(st.healed.begin());
      if (!st.dead.count(d))
        continue;
      take_back(self, d,
                "the path from " + who(st, other) + " to " + who(st, d)
                  + " answers a probe again");
      return; // one re-plan at a time; the next tick takes the others
    }
  for (const auto& p : st.cut.due(now, st.dead)) {
    if (static_cast<size_t>(p.device) >= st.opts.nodes.size()) {
      st.cut.forget(p.device); // no endpoint to probe it at
      continue;
    }
    // Over the path that failed, the way requests take it (path_answers):
    // a helper actor waits for it while the server serves.
    auto from = st.devices[p.other];
    auto to = st.opts.nodes[p.device];
    auto label = who(st, p.device) + " from " + who(st, p.other);
    auto server = caf::actor_cast<server_actor>(self);
    const int64_t d = p.device;
    auto helper = self->spawn<caf::detached>([=](caf::blocking_actor* h) {
      std::string why;
      const bool answered = path_answers(h->system(), from, to, &why);
      if (!answered)
        spdlog::debug("server: probing the path to {}: {}", label, why);
      h->send(server, probe_atom::value, d, answered);
    });
    st.probing[p.device] = helper.address();
  }
}

void path_probed(server_self self, const caf::actor_addr& from, int d, bool answered) {
  auto& st = self->state;
  auto it = st.probing.find(d);
  if (it == st.probing.end() || it->second != from)
    return; // not the helper this server runs for that path
  st.probing.erase(it);
  if (ended(st))
    return;
  const auto now = server_clock::now();
  const int other = st.cut.ended(d, answered, now);
  if (other < 0)
    return;
  st.healed[d] = other;
  probe_cut_paths(self, now);
}

} // namespace asteroid::actors::serving
