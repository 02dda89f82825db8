#pragma once
// A plane counts a frame as sent when its write completes on the plane's own
// thread, which may be after the receiver has already delivered it; a test
// that checks a sender's counters right after a delivery reads them until
// they settle instead of once.
#include "asteroid/actors/data_plane.hpp"

#include <chrono>
#include <thread>

namespace asteroid::test {

/// The plane's counters once `settled` holds of them, or as they are after
/// `wait` (so a check on them fails with the last value seen).
template <class Predicate>
actors::data_plane::counters settled_stats(const actors::data_plane& plane,
                                           Predicate settled,
                                           std::chrono::milliseconds wait
                                           = std::chrono::seconds(2)) {
  const auto until = std::chrono::steady_clock::now() + wait;
  auto s = plane.stats();
  while (!settled(s) && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    s = plane.stats();
  }
  return s;
}

} // namespace asteroid::test
