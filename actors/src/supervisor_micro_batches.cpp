// Supervisor: the micro-batch actors of the steps it injects (micro_batch.hpp).
#include "supervisor.hpp"

#include "asteroid/actors/micro_batch.hpp"
#include "asteroid/actors/micro_batch_relay.hpp"

#include <spdlog/spdlog.h>

namespace asteroid::actors::detail {

void supervisor::spawn_micro_batches(int64_t step) {
  auto old = micro_batches_.find(step);
  if (old != micro_batches_.end()) {
    for (auto& m : old->second)
      caf::anon_send(m, stop_atom::value);
    micro_batches_.erase(old);
  }
  if (!job_.micro_batch_actors)
    return;
  // The same route for every micro-batch of the step: the plan's shares are
  // rows of each micro-batch.
  micro_batch_route route;
  route.step = step;
  for (const auto& st : plan_.stages) {
    std::vector<micro_batch_piece> pieces;
    int64_t at = 0;
    for (size_t r = 0; r < st.shares.size(); ++r) {
      if (st.shares[r] > 0)
        pieces.push_back({static_cast<int32_t>(r), st.devices[r],
                          name_of(st.devices[r]), at, at + st.shares[r]});
      at += st.shares[r];
    }
    route.stages.push_back(std::move(pieces));
  }
  auto& actors = micro_batches_[step];
  std::vector<caf::actor> handles;
  for (int m = 0; m < plan_.micro_batches; ++m) {
    route.micro_batch = m;
    actors.push_back(spawn_micro_batch(sys_, route));
    handles.push_back(caf::actor_cast<caf::actor>(actors.back()));
  }
  if (!micro_batch_relay_)
    micro_batch_relay_ = spawn_micro_batch_relay(sys_);
  // A local send: in the relay's mailbox before any replica hears of the
  // step (the start goes out after this), so no report finds it unknown.
  self_->send(micro_batch_relay_, adopt_atom::value, step,
              static_cast<int64_t>(generation_), std::move(handles));
}

caf::actor supervisor::micro_batch_reports_to(int64_t step) const {
  if (micro_batches_.count(step) == 0)
    return {};
  return caf::actor_cast<caf::actor>(micro_batch_relay_);
}

json supervisor::micro_batches_in_flight() {
  // Local actors: each answers at once, or its request fails at once
  // because it quit after its last backward pass. Requests without a
  // timeout (a timed request leaves its timeout behind: supervisor.hpp,
  // exchange); the wait for them is bounded all the same. The answers are
  // kept apart from this frame: one that came after the wait gave up must
  // find them still there.
  struct answers {
    size_t asked = 0;
    size_t answered = 0;
    json found = json::array();
  };
  auto a = std::make_shared<answers>();
  auto* inbox = &inbox_;
  for (auto& [step, actors] : micro_batches_)
    for (auto& m : actors) {
      ++a->asked;
      self_->request(m, caf::infinite, where_atom::value)
        .then(
          [a, inbox](std::string& text) {
            ++a->answered;
            auto w = json::parse(text, nullptr, false);
            if (!w.is_discarded() && !w.value("finished", false))
              a->found.push_back(std::move(w));
            inbox->poke();
          },
          [a, inbox](caf::error&) {
            ++a->answered;
            inbox->poke();
          });
    }
  inbox_.wait_until(clock::now() + milliseconds(job_.step_timeout_ms),
                    [&] { return a->answered == a->asked; });
  return a->found;
}

int64_t supervisor::forget_micro_batches(int64_t step) {
  auto it = micro_batches_.find(step);
  if (it == micro_batches_.end())
    return 0;
  for (auto& m : it->second)
    caf::anon_send(m, stop_atom::value);
  micro_batches_.erase(it);
  // Every replica sent its last report of the step before its done, on the
  // same connection to this process, so the relay has taken them all before
  // this request: the count is the step's, not a race's. The relay is a
  // local actor that answers at once (or the request fails at once): no
  // timeout, which would be left behind every step (supervisor.hpp).
  auto relayed = std::make_shared<std::optional<int64_t>>();
  auto* inbox = &inbox_;
  self_->request(micro_batch_relay_, caf::infinite, release_atom::value, step)
    .then(
      [relayed, inbox](int64_t n) {
        *relayed = n;
        inbox->poke();
      },
      [relayed, inbox](caf::error&) {
        *relayed = int64_t{-1};
        inbox->poke();
      });
  inbox_.wait_until(clock::now() + milliseconds(job_.step_timeout_ms),
                    [&] { return relayed->has_value(); });
  return relayed->value_or(-1);
}

void supervisor::stop_micro_batches() {
  for (auto& [step, actors] : micro_batches_)
    for (auto& m : actors)
      caf::anon_send(m, stop_atom::value);
  micro_batches_.clear();
  if (micro_batch_relay_)
    self_->send(micro_batch_relay_, release_atom::value, int64_t{-1});
}

} // namespace asteroid::actors::detail
