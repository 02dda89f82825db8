#pragma once
// How much memory this process holds, as the kernel counts it and as
// LibTorch's CPU allocator counts it: what a node reports as its measured
// peaks next to its budget and its replicas' predicted footprints.
#include <cstdint>

namespace asteroid::actors::detail {

/// The process's resident high-water mark in bytes (VmHWM of
/// /proc/self/status: LibTorch, CAF and every replica of the process
/// together); -1 where the system does not say.
int64_t resident_peak_bytes();

/// What the process holds resident now (VmRSS); -1 where the system does
/// not say.
int64_t resident_bytes();

/// Starts measuring a job's peak: the baseline becomes what the process
/// holds now (LibTorch, CAF, the node itself, and what an earlier job left
/// in the allocator's heap), and the kernel's high-water mark is reset to it
/// (/proc/self/clear_refs; where that is refused, the mark keeps earlier
/// peaks). A node calls it as its device starts and when a job claims it.
void restart_peak_measurement();

/// The resident high-water mark above the baseline (at least 0): the peak
/// the job added, which the node's memory budget is for; -1 where the
/// system does not say or no measurement was started.
int64_t job_peak_bytes();

/// The peak of the bytes LibTorch's CPU allocator held for tensors since the
/// last restart_peak_measurement, above what it held then: the part of the
/// resident mark that the planner's model predicts (weights, gradients,
/// optimizer state, activations), without the heap's slack, the libraries and
/// buffers outside LibTorch. -1 before the first restart.
int64_t tensor_job_peak_bytes();

} // namespace asteroid::actors::detail
