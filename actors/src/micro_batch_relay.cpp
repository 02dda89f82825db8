#include "asteroid/actors/micro_batch_relay.hpp"

#include "unexpected.hpp"

#include <spdlog/spdlog.h>

#include <map>

namespace asteroid::actors {

namespace {

/// One step the step driver fed.
struct relayed_step {
  int64_t generation = -1;               ///< whose reports it takes
  std::vector<micro_batch_actor> actors; ///< by micro-batch
  int64_t passes = 0;                    ///< relayed to them so far
};

struct micro_batch_relay_state {
  /// The steps the step driver fed and has not released.
  std::map<int64_t, relayed_step> steps;
  static inline const char* name = "asteroid.micro_batch_relay";
};

using relay_self =
  micro_batch_relay_actor::stateful_pointer<micro_batch_relay_state>;

/// Whether the current message comes from this actor's own process: only
/// the step driver there says which actors a step has.
bool from_own_process(relay_self self) {
  auto sender = self->current_sender();
  return sender && sender->node() == self->node();
}

micro_batch_relay_actor::behavior_type relay_fun(relay_self self) {
  detail::drop_unexpected(self, "micro-batch relay");
  return {
    [=](progress_atom, int64_t generation, int64_t step, int32_t stage,
        int32_t replica, const std::vector<int32_t>& passes) {
      auto it = self->state.steps.find(step);
      // A step released while reports of it were on their way (the step
      // driver stops its actors anyway), or a replica of a deployment before
      // whose report comes after the step was fed again.
      if (it == self->state.steps.end() || it->second.generation != generation)
        return;
      const auto& actors = it->second.actors;
      size_t dropped = 0;
      for (auto code : passes) {
        auto mb = code / 2;
        if (code < 0 || static_cast<size_t>(mb) >= actors.size()) {
          ++dropped;
          continue;
        }
        self->send(actors[static_cast<size_t>(mb)], progress_atom::value,
                   stage, replica, int32_t{code % 2});
        ++it->second.passes;
      }
      if (dropped > 0) // one line per report, however many passes it names
        spdlog::error("micro-batch relay: dropped {} of {} passes s{}r{} "
                      "reported for step {}: no such micro-batch in it",
                      dropped, passes.size(), stage, replica, step);
    },
    [=](adopt_atom, int64_t step, int64_t generation,
        const std::vector<caf::actor>& actors) {
      if (!from_own_process(self)) {
        spdlog::error("micro-batch relay: ignored micro-batch actors for "
                      "step {} from another process",
                      step);
        return;
      }
      auto& entry = self->state.steps[step];
      entry = relayed_step{};
      entry.generation = generation;
      for (auto& a : actors)
        entry.actors.push_back(caf::actor_cast<micro_batch_actor>(a));
    },
    [=](release_atom, int64_t step) -> int64_t {
      if (!from_own_process(self))
        return -1;
      auto& steps = self->state.steps;
      if (step < 0) {
        steps.clear();
        return 0;
      }
      auto it = steps.find(step);
      if (it == steps.end())
        return 0;
      auto passes = it->second.passes;
      steps.erase(it);
      return passes;
    },
    [=](stop_atom) {
      if (from_own_process(self))
        self->quit();
    },
  };
}

} // namespace

micro_batch_relay_actor spawn_micro_batch_relay(caf::actor_system& sys) {
  // Event-based and not detached, as the micro-batch actors it feeds.
  return sys.spawn(relay_fun);
}

} // namespace asteroid::actors
