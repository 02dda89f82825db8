#pragma once
// The time a replica's device spends computing: measured on a real device,
// emulated (padded) on a device that stands in for a slower one.
#include "replica_state.hpp"

#include <functional>
#include <string>

namespace asteroid::actors::detail {

/// Runs `work`, pads it to what the emulated device would have taken, adds
/// the device's time to the step's busy time and records a trace event
/// called `name` (see device_clock.cpp for how the emulated time is chosen;
/// `profiled_s` >= 0: the work's time on the profiled device, run_emulated).
void compute(replica_self* self, const std::string& name,
             const std::function<void()>& work, double profiled_s = -1);

} // namespace asteroid::actors::detail
