#pragma once

#include "asteroid/planner/simulator.hpp"

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <iosfwd>
#include <map>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace asteroid::planner {

/// A value in an event's `args`.
using trace_arg = std::variant<int64_t, double, std::string>;

/// One complete ("ph":"X") event of the Chrome trace-event format.
///
/// Generic on purpose: the simulator and the real runtime both emit these,
/// so a simulated and a measured round can be viewed side by side in
/// chrome://tracing or Perfetto.
struct trace_event {
  std::string name;
  /// Comma-separated categories ("compute", "comm", "allreduce", ...).
  std::string category;
  double start_us = 0.0;
  double dur_us = 0.0;
  /// Process row (the simulator: a device or a link).
  int pid = 0;
  /// Thread row inside the process (the simulator: a stage replica).
  int tid = 0;
  std::map<std::string, trace_arg> args;
};

/// A trace: events plus names of the process and thread rows.
struct chrome_trace {
  std::vector<trace_event> events;
  std::map<int, std::string> process_names;
  /// Keyed by (pid, tid).
  std::map<std::pair<int, int>, std::string> thread_names;
};

/// `{"traceEvents": [...], "displayTimeUnit": "ms"}` with one "X" event per
/// event and "M" metadata events naming processes and threads.
nlohmann::json to_json(const chrome_trace& trace);

/// Writes `to_json(trace)` to a stream.
void write_chrome_trace(const chrome_trace& trace, std::ostream& out);
/// Writes to a file; throws std::runtime_error naming the path if it cannot
/// be written.
void write_chrome_trace(const chrome_trace& trace, const std::string& path);

/// The trace of a simulated round.
///
/// Each device is a process (pid = cluster device index, named
/// `device_names[pid]` when given, else "device <pid>") holding one thread
/// per stage replica it runs (tid = 100 * stage + replica, named "s1r0").
/// Each stage boundary is a process after the devices (pid = first free
/// index + boundary, "link s0-s1") with thread 0 for activations and
/// thread 1 for gradients. Instructions of zero duration are left out.
/// Event names are the instruction (`FWD mb=2`, `ALLREDUCE`) or, on links,
/// `ACT mb=2` / `GRAD mb=2`; args carry stage, replica and micro-batch.
chrome_trace trace_from_simulation(
    const simulation_result& result,
    const std::vector<std::string>& device_names = {});

} // namespace asteroid::planner
