#pragma once
// How much memory this process holds, as the kernel counts it: what a node
// reports as its measured peak next to its budget and its replicas'
// predicted footprints.
#include <cstdint>

namespace asteroid::actors::detail {

/// The process's resident high-water mark in bytes (VmHWM of
/// /proc/self/status: LibTorch, CAF and every replica of the process
/// together); -1 where the system does not say.
int64_t resident_peak_bytes();

} // namespace asteroid::actors::detail
