#pragma once
// supervisor::ask and supervisor::await_reply (the step driver's bounded,
// heartbeat-aware wait for one actor's reply) and supervisor::exchange (the
// same without the watch), for every file that asks. Both wait in the
// driver's inbox (fiber_inbox.hpp), which bounds every wait by its deadline.
#include "message_dispatch.hpp"
#include "supervisor.hpp"

#include <optional>

namespace asteroid::actors::detail {

/// Takes `m` into `reply` when it is `from`'s answer made of `Reply` types.
template <class... Reply>
bool take_reply(inbox_message& m, const caf::strong_actor_ptr& from,
                std::optional<caf::message>& reply) {
  if (m.sender != from || !m.content.template match_elements<Reply...>())
    return false;
  reply = std::move(m.content);
  return true;
}

template <class... Reply, class Handle, class... Ts>
caf::message supervisor::ask(int d, const Handle& to, milliseconds timeout,
                             const std::string& what, const Ts&... xs) {
  self_->send(to, xs...);
  return await_reply<Reply...>(d, to, timeout, what);
}

template <class... Reply, class Handle>
caf::message supervisor::await_reply(int d, const Handle& to, milliseconds timeout,
                                     const std::string& what) {
  // A plain send: the answer comes back as an ordinary message, so one
  // receive sees it and a down message alike. Heartbeats go on meanwhile:
  // a node that hangs (SIGSTOP, a silent cut) keeps its connection open,
  // and without them a deployment would wait for the whole timeout and
  // then fail the job. Nodes answer heartbeats while they build a replica
  // (device.cpp), so a busy node is not taken for a hung one.
  auto from = caf::actor_cast<caf::strong_actor_ptr>(to);
  auto deadline = clock::now() + timeout;
  heartbeats_.catch_up(clock::now());
  std::optional<caf::message> reply;
  std::pair<int, std::string> gone{-1, {}};
  while (!reply) {
    auto now = clock::now();
    auto left = std::chrono::duration_cast<milliseconds>(deadline - now);
    if (left.count() <= 0)
      throw std::runtime_error(what + ": no answer"
                               + (d >= 0 ? " from node " + who(d) : std::string{})
                               + " within " + std::to_string(timeout.count()) + " ms");
    if (heartbeats_.due(now))
      ping_all(now);
    // Further silent devices stay marked in the monitor: drain_losses
    // takes them before the next plan.
    for (int x : heartbeats_.newly_dead(now))
      if (gone.first < 0 && !dead_.count(x))
        gone = {x, silence_reason()};
    auto wait = std::max(milliseconds(1),
                         std::min(left, std::chrono::duration_cast<milliseconds>(
                                          heartbeats_.next_ping() - now)));
    if (gone.first < 0)
      inbox_.receive_until(now + wait, [&](inbox_message& m) {
        // Anything else waits for the step loop (late reports).
        return dispatch(
                 m.content,
                 [&](caf::down_msg& dm) {
                   auto down = device_down(dm);
                   if (down.first >= 0 && !dead_.count(down.first))
                     gone = down;
                 },
                 [&](heartbeat_atom, int64_t seq) { heartbeat_answered(seq); })
               || take_reply<Reply...>(m, from, reply);
      });
    if (gone.first >= 0) {
      // d's device still answers, later (a replica's answer needs no
      // waiting for: the replica is stopped with its deployment).
      if (d >= 0 && gone.first != d
          && from == caf::actor_cast<caf::strong_actor_ptr>(devices_[d]))
        ++abandoned_[d];
      throw device_lost(gone.first, what + ": node " + who(gone.first)
                                      + " was lost: " + gone.second);
    }
  }
  return std::move(*reply);
}

template <class... Reply, class Handle, class... Ts>
caf::message supervisor::exchange(const Handle& to, milliseconds timeout,
                                  const std::string& what, const Ts&... xs) {
  // A plain send: the answer comes back as an ordinary message, and one
  // that comes after the timeout is dropped by the step loop like any late
  // answer (a timed request's would stay in the mailbox: supervisor.hpp).
  self_->send(to, xs...);
  auto from = caf::actor_cast<caf::strong_actor_ptr>(to);
  auto deadline = clock::now() + timeout;
  std::optional<caf::message> reply;
  std::string error;
  while (!reply && error.empty()) {
    auto now = clock::now();
    if (now >= deadline)
      throw std::runtime_error(what + ": no answer within "
                               + std::to_string(timeout.count()) + " ms");
    // Anything else waits for the loop it belongs to (heartbeat answers,
    // down messages, late reports).
    inbox_.receive_until(deadline, [&](inbox_message& m) {
      if (m.sender != from)
        return false;
      if (m.content.match_elements<caf::error>()) {
        error = sys_.render(m.content.get_as<caf::error>(0));
        return true;
      }
      return take_reply<Reply...>(m, from, reply);
    });
  }
  if (!error.empty())
    throw std::runtime_error(what + ": " + error);
  return std::move(*reply);
}

} // namespace asteroid::actors::detail
