#include "asteroid/kernels/allocator.hpp"

#include <malloc.h>

namespace asteroid::kernels {

void keep_tensor_buffers_in_heap() {
  // 32 MiB is the largest mmap threshold glibc accepts on 64-bit targets.
  ::mallopt(M_MMAP_THRESHOLD, 32 << 20);
  ::mallopt(M_TRIM_THRESHOLD, 512 << 20);
  // One arena: a replica is a new thread per deployment, and a new thread
  // may get a fresh (cold) arena whose heap page-faults its way up again.
  ::mallopt(M_ARENA_MAX, 1);
}

} // namespace asteroid::kernels
