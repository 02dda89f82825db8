#include "process_memory.hpp"

#include "asteroid/training/memory_tracker.hpp"

#include <algorithm>
#include <atomic>
#include <fstream>
#include <sstream>
#include <string>

namespace asteroid::actors::detail {

namespace {

/// A "Name:   N kB" line of /proc/self/status, in bytes; -1 without one.
int64_t status_bytes(const char* field) {
  std::ifstream status{"/proc/self/status"};
  const std::string prefix = std::string(field) + ":";
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(prefix, 0) != 0)
      continue;
    std::istringstream fields{line.substr(prefix.size())};
    int64_t kib = -1;
    if (fields >> kib && kib >= 0)
      return kib * 1024;
    return -1;
  }
  return -1;
}

std::atomic<int64_t> baseline{-1};
std::atomic<int64_t> tensor_baseline{-1};

// Installed at the first restart, as a node's device starts: before any job
// allocates, so every tensor of a job passes through it.
training::memory_tracker& tensors() {
  static training::memory_tracker tracker;
  return tracker;
}

} // namespace

int64_t resident_peak_bytes() { return status_bytes("VmHWM"); }

int64_t resident_bytes() { return status_bytes("VmRSS"); }

void restart_peak_measurement() {
  // "5" resets VmHWM to the current resident size (proc(5), clear_refs).
  std::ofstream{"/proc/self/clear_refs"} << "5";
  baseline.store(resident_bytes());
  tensors().reset_peak();
  tensor_baseline.store(tensors().current_bytes());
}

int64_t job_peak_bytes() {
  auto base = baseline.load();
  auto peak = resident_peak_bytes();
  if (base < 0 || peak < 0)
    return -1;
  return std::max<int64_t>(0, peak - base);
}

int64_t tensor_job_peak_bytes() {
  auto base = tensor_baseline.load();
  if (base < 0)
    return -1;
  return std::max<int64_t>(0, tensors().peak_bytes() - base);
}

} // namespace asteroid::actors::detail
