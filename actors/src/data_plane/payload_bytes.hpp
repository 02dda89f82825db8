#pragma once
// Writing a large received payload into its buffer around the CPU's caches.
//
// A payload larger than the last-level cache cannot stay there until it is
// used, and ordinary stores into memory that is not cached first read every
// line they write (read-for-ownership). On the 2-core development host (an
// AMD EPYC guest, 8 MiB L3) that held memcpy in 1 MiB calls into a 16 MiB
// buffer to 7.1-7.8 GB/s where into a cached 1 MiB one it ran at 24-30 GB/s,
// and the kernel's copy out of a socket pays the same: a throwaway loopback
// reader of 1 GiB took a median of 2.81 GB/s read straight into a 16 MiB
// buffer against 3.31 into one reused 1 MiB buffer (9 interleaved runs
// each). Non-temporal stores write whole lines without reading them
// (21-24 GB/s into the 16 MiB buffer), so a large payload is read a little
// at a time into a buffer that stays cached and copied on from there with
// them: 3.27 GB/s in the same runs. That pays only when the payload's new
// bytes are not also written by a zero-fill, which growing a std::string
// does before C++23 (3.06 GB/s with it).
#include <cstddef>
#include <string>

namespace asteroid::actors::detail {

/// Whether this build can do both: grow a string without writing its new
/// bytes, and copy with non-temporal stores (x86-64 only; elsewhere a large
/// payload is read into place as a small one is).
bool can_write_around_cache();

/// `s` resized to `n` >= s.size() bytes; the new ones are left unwritten
/// where can_write_around_cache() (the caller writes every one before
/// anything reads them), zero-filled otherwise.
void grow_unwritten(std::string& s, size_t n);

/// Copies `n` bytes from `from` to `to` with non-temporal stores, visible to
/// other threads when it returns; a plain copy where
/// !can_write_around_cache().
void copy_around_cache(char* to, const char* from, size_t n);

} // namespace asteroid::actors::detail
