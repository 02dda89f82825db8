#pragma once
// Seconds on the steady clock: the time base of the trainer's timings, its
// progress line and its metrics records (differences only; never wall time).
#include <chrono>

namespace asteroid::training::detail {

inline double monotonic_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

} // namespace asteroid::training::detail
