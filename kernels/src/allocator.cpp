#include "asteroid/kernels/allocator.hpp"

#include <malloc.h>

namespace asteroid::kernels {

void keep_tensor_buffers_in_heap() {
  // 32 MiB is the largest mmap threshold glibc accepts on 64-bit targets.
  ::mallopt(M_MMAP_THRESHOLD, 32 << 20);
  ::mallopt(M_TRIM_THRESHOLD, 512 << 20);
}

} // namespace asteroid::kernels
