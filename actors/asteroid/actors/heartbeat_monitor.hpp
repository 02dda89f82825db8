#pragma once
/// \file
/// Application heartbeats (issue #5): CAF reports a *closed* connection as a
/// down message, but a hung process (SIGSTOP) or a silent network cut keeps
/// its connection open, and CAF 0.17's own middleman heartbeats only close
/// a connection after its (long) connection timeout. The supervisor pings
/// every device each `interval` and declares a device dead once it has not
/// answered for `misses` intervals. Pure bookkeeping: the caller owns the
/// clock and the messages, so this is testable without actors.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

namespace asteroid::actors {

/// How long a node's data plane keeps trying a silent peer of a job whose
/// heartbeats are `interval_ms` × `misses` before it gives the peer up and
/// tells the job (`ast_claim`, data_plane::serve_job): that window and one
/// more interval (at most 500 ms more). Why: a failed path between two
/// nodes that both still answer heartbeats is then found about as fast as a
/// silent node (within the window + 1 s), a link that heals well within
/// the window costs a stall (data_plane::serve_job says how well), and a
/// node that falls silent as a whole is still found by its heartbeats
/// first, so the loss names that cause.
inline int64_t path_window_ms(int64_t interval_ms, int misses) {
  return interval_ms * misses + std::min<int64_t>(interval_ms, 500);
}

class heartbeat_monitor {
public:
  using clock = std::chrono::steady_clock;

  heartbeat_monitor(int devices, std::chrono::milliseconds interval, int misses);

  std::chrono::milliseconds interval() const { return interval_; }
  int misses() const { return misses_; }
  /// Silence after which a device counts as dead: interval × misses.
  std::chrono::milliseconds tolerance() const { return interval_ * misses_; }

  /// Starts (or restarts, e.g. after a long deployment during which pings
  /// were not sent) the clock of every device still alive.
  void reset(clock::time_point now);
  /// Call before pinging again after a pause (the supervisor was deploying
  /// or checkpointing and sent no pings): when a whole round was skipped,
  /// the silence was ours, so every live device's clock restarts.
  void catch_up(clock::time_point now) {
    if (now > next_ping_ + interval_)
      reset(now);
  }
  /// True when it is time to ping; then call `pinged`.
  bool due(clock::time_point now) const { return now >= next_ping_; }
  /// Sequence number of the ping round just sent.
  int64_t pinged(clock::time_point now);
  clock::time_point next_ping() const { return next_ping_; }
  /// Device `d` answered ping `seq`.
  void answered(int d, int64_t seq, clock::time_point now);
  /// Devices silent for longer than the tolerance and not yet reported;
  /// each is reported once (then treated as dead).
  std::vector<int> newly_dead(clock::time_point now);
  /// Marks `d` dead for another reason (its connection closed).
  void mark_dead(int d);
  bool dead(int d) const { return dead_.at(static_cast<size_t>(d)); }
  /// Brings `d` back (a node that re-joined).
  void revive(int d, clock::time_point now);
  /// Watches one more device (a node added to the job), alive and seen
  /// `now`; returns its index.
  int add_device(clock::time_point now);
  int size() const { return static_cast<int>(dead_.size()); }
  /// When `d` last answered, or when a pause of this monitor's own
  /// (`catch_up`, `reset`) restarted its clock: what its death is judged by.
  clock::time_point last_seen(int d) const {
    return last_seen_.at(static_cast<size_t>(d));
  }
  /// When `d` last answered a ping itself (or was added or revived), which
  /// no pause of this monitor moves: what says whether a node silent to
  /// the supervisor may be blamed for a path (unreachable_reports.hpp). A
  /// node cut off while the supervisor paused (injecting that very cut, on
  /// a loaded host) looked freshly seen after the restart, and its report
  /// blamed the path before the heartbeats could find the silence.
  clock::time_point last_answer(int d) const {
    return last_answer_.at(static_cast<size_t>(d));
  }

private:
  std::chrono::milliseconds interval_;
  int misses_;
  int64_t seq_ = 0;
  clock::time_point next_ping_{};
  std::vector<clock::time_point> last_seen_, last_answer_;
  std::vector<bool> dead_;
};

} // namespace asteroid::actors
