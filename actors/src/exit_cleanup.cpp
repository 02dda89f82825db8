#include "asteroid/actors/exit_cleanup.hpp"

#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <unistd.h>

namespace asteroid::actors {

namespace {

// Fixed slots of heap copies: the handler only loads pointers. A withdrawn
// copy is not freed, since a handler running on another thread may be
// reading it; a few bytes per local cluster is all that is kept.
constexpr size_t slot_count = 512;
std::array<std::atomic<const char*>, slot_count> slots{};
// One past the highest slot ever used: the handler scans no further.
std::atomic<size_t> used{0};

} // namespace

int remember_path_for_exit(const std::string& path) {
  const char* copy = ::strdup(path.c_str());
  if (copy == nullptr)
    return -1;
  for (size_t i = 0; i < slot_count; ++i) {
    const char* none = nullptr;
    if (slots[i].compare_exchange_strong(none, copy)) {
      size_t seen = used.load();
      while (seen < i + 1 && !used.compare_exchange_weak(seen, i + 1)) {
      }
      return static_cast<int>(i);
    }
  }
  return -1;
}

void forget_path(int ticket) {
  if (ticket >= 0 && static_cast<size_t>(ticket) < slot_count)
    slots[static_cast<size_t>(ticket)].store(nullptr);
}

void remove_registered_paths() noexcept {
  const int saved_errno = errno;
  // Newest first, so a folder's files (registered after it) go before it.
  // A slot freed and reused later can put a folder after its files; the
  // passes after the first take such folders (and their parents) then.
  for (int pass = 0; pass < 4; ++pass) {
    bool left = false;
    for (size_t i = used.load(); i-- > 0;) {
      const char* path = slots[i].load();
      if (path == nullptr)
        continue;
      if (::unlink(path) == 0 || errno == ENOENT)
        continue;
      if ((errno == EISDIR || errno == EPERM) && ::rmdir(path) != 0 && errno != ENOENT)
        left = true;
    }
    if (!left)
      break;
  }
  errno = saved_errno;
}

} // namespace asteroid::actors
