#include "asteroid/actors/micro_batch.hpp"

#include "unexpected.hpp"

#include <spdlog/spdlog.h>

namespace asteroid::actors {

namespace {

struct micro_batch_state {
  std::optional<micro_batch_progress> progress;
  static inline const char* name = "asteroid.micro_batch";
};

using micro_batch_self = micro_batch_actor::stateful_pointer<micro_batch_state>;

std::string name_of(const micro_batch_route& r) {
  return "micro-batch " + std::to_string(r.micro_batch) + " of step "
         + std::to_string(r.step);
}

micro_batch_actor::behavior_type micro_batch_fun(micro_batch_self self,
                                                 micro_batch_route route) {
  auto name = name_of(route);
  self->state.progress.emplace(std::move(route));
  detail::drop_unexpected(self, name);
  if (self->state.progress->finished()) // no rows anywhere: nothing to wait for
    self->quit();
  return {
    [=](progress_atom, int32_t stage, int32_t replica, int32_t pass) {
      auto& progress = *self->state.progress;
      auto why = progress.report(stage, replica, pass);
      if (!why.empty()) {
        spdlog::error("{}: dropped a report of s{}r{}: {}", name, stage,
                      replica, why);
        return;
      }
      if (progress.finished())
        self->quit(); // its last backward pass: the micro-batch is through
    },
    [=](where_atom) { return self->state.progress->where().dump(); },
    [=](stop_atom) { self->quit(); },
  };
}

} // namespace

micro_batch_actor spawn_micro_batch(caf::actor_system& sys,
                                    micro_batch_route route) {
  // Event-based and not detached: it only counts, so it shares the
  // scheduler's threads instead of taking one of its own.
  return sys.spawn(micro_batch_fun, std::move(route));
}

} // namespace asteroid::actors
