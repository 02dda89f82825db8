#include "asteroid/actors/heartbeat_monitor.hpp"

#include <stdexcept>

namespace asteroid::actors {

heartbeat_monitor::heartbeat_monitor(int devices,
                                     std::chrono::milliseconds interval,
                                     int misses)
  : interval_(interval), misses_(misses),
    last_seen_(static_cast<size_t>(devices)), last_answer_(static_cast<size_t>(devices)),
    dead_(static_cast<size_t>(devices), false) {
  if (interval.count() <= 0)
    throw std::invalid_argument("heartbeat interval must be > 0 ms");
  if (misses < 1)
    throw std::invalid_argument("heartbeat miss count must be >= 1");
}

void heartbeat_monitor::reset(clock::time_point now) {
  for (auto& t : last_seen_)
    t = now;
  next_ping_ = now;
}

int64_t heartbeat_monitor::pinged(clock::time_point now) {
  next_ping_ = now + interval_;
  return ++seq_;
}

void heartbeat_monitor::answered(int d, int64_t seq, clock::time_point now) {
  if (d < 0 || static_cast<size_t>(d) >= last_seen_.size() || seq > seq_)
    return; // not ours: never trust a peer's numbers
  if (now > last_seen_[static_cast<size_t>(d)])
    last_seen_[static_cast<size_t>(d)] = now;
  if (now > last_answer_[static_cast<size_t>(d)])
    last_answer_[static_cast<size_t>(d)] = now;
}

std::vector<int> heartbeat_monitor::newly_dead(clock::time_point now) {
  std::vector<int> out;
  for (size_t d = 0; d < last_seen_.size(); ++d)
    if (!dead_[d] && now - last_seen_[d] > tolerance()) {
      dead_[d] = true;
      out.push_back(static_cast<int>(d));
    }
  return out;
}

void heartbeat_monitor::mark_dead(int d) {
  dead_.at(static_cast<size_t>(d)) = true;
}

void heartbeat_monitor::revive(int d, clock::time_point now) {
  dead_.at(static_cast<size_t>(d)) = false;
  last_seen_.at(static_cast<size_t>(d)) = now;
  last_answer_.at(static_cast<size_t>(d)) = now;
}

int heartbeat_monitor::add_device(clock::time_point now) {
  dead_.push_back(false);
  last_seen_.push_back(now);
  last_answer_.push_back(now);
  return size() - 1;
}

} // namespace asteroid::actors
