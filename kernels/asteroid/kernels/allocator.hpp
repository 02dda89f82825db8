#pragma once
/// \file
/// Process-wide allocator setting for tensor-heavy processes.

namespace asteroid::kernels {

/// Keeps tensor-sized buffers (up to 32 MiB) in glibc's heap for reuse
/// instead of a fresh mapping per allocation, stops the heap from handing
/// freed memory back below 512 MiB, and uses one arena for all threads.
///
/// Why: a training step and every tensor message allocate and free buffers
/// of megabytes. Past glibc's mmap threshold each is a new mapping, and
/// thread arenas return freed tops to the kernel, so every one of them
/// page-faults again: 256 faults per MiB, each expensive in a VM. Measured
/// on the 2-core CI machine: 1 MiB messages between node processes went
/// from 0.02x to 0.3-0.6x of raw TCP through CAF with this alone, and a
/// plain LibTorch CNN step changed by tens of percent, run to run. One arena:
/// every deployment starts a replica on a new thread, which glibc may give
/// a cold arena of its own; the same plan then ran 20-40 % slower in the
/// first jobs of a node process than in later ones.
/// Call it first thing in main(); later calls are harmless.
void keep_tensor_buffers_in_heap();

} // namespace asteroid::kernels
