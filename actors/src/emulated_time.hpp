#pragma once
// The time a device spends computing, measured on a real device and padded
// on an emulated one that stands in for a slower device (device_clock.cpp
// says how the emulated time is chosen). Shared by training replicas and
// inference stages, so both emulate a device the same way.
#include <functional>

namespace asteroid::actors::detail {

struct device_time {
  double host_s = 0;    ///< wall time the work took on this host
  double cpu_s = 0;     ///< this thread's CPU time for it
  double device_s = 0;  ///< what the (emulated) device took
  double overrun_s = 0; ///< host time beyond the emulated time (overloaded host)
};

/// Runs `work` and, with `slowdown` > 1 or a `profiled_s` >= 0, sleeps until
/// the emulated device would have finished it, in slices, stopping early
/// once `abandon` (if given) says nobody needs the result. `profiled_s`:
/// the work's time on the profiled device (job_spec::compute_time
/// "profile"), which the device takes `slowdown` times; < 0: the device
/// takes `slowdown` times what this host took.
device_time run_emulated(double slowdown, const std::function<void()>& work,
                         const std::function<bool()>& abandon = {},
                         double profiled_s = -1);

/// Microseconds since the epoch (trace timestamps).
double wall_us();

} // namespace asteroid::actors::detail
