#include "memory_hog.hpp"

#include <spdlog/spdlog.h>

#include <cstring>
#include <new>

#include <unistd.h>

namespace asteroid::actors::detail {

std::string memory_hog::hold(int64_t bytes, const std::string& who) {
  if (bytes <= 0)
    return "a memory hog needs bytes > 0, got " + std::to_string(bytes);
  const int64_t physical =
    static_cast<int64_t>(::sysconf(_SC_PHYS_PAGES)) * ::sysconf(_SC_PAGESIZE);
  uint64_t epoch = 0;
  {
    std::lock_guard<std::mutex> lock{mu_};
    if (physical <= 0 || bytes > physical / 2 - bytes_)
      return who + " refused a memory hog of " + std::to_string(bytes)
             + " bytes: at most half of this machine's " + std::to_string(physical)
             + " bytes in all (" + std::to_string(bytes_) + " held)";
    bytes_ += bytes; // counted now, so that two hogs at once stay within the half
    epoch = epoch_;
  }
  // Written outside the lock: release() must not wait for it.
  std::unique_ptr<char[]> block{new (std::nothrow) char[static_cast<size_t>(bytes)]};
  if (block)
    std::memset(block.get(), 1, static_cast<size_t>(bytes)); // resident from here
  std::lock_guard<std::mutex> lock{mu_};
  if (epoch != epoch_) // released meanwhile: the job is over, so is this hog
    return who + ": the memory hog was released while it was being written";
  if (!block) {
    bytes_ -= bytes;
    return who + " cannot allocate " + std::to_string(bytes) + " bytes for a memory hog";
  }
  blocks_.push_back(std::move(block));
  spdlog::warn("{}: holding {} more bytes resident (injected fault), {} in all", who,
               bytes, bytes_);
  return {};
}

void memory_hog::release() {
  std::vector<std::unique_ptr<char[]>> gone;
  std::lock_guard<std::mutex> lock{mu_};
  gone.swap(blocks_);
  bytes_ = 0;
  ++epoch_;
}

} // namespace asteroid::actors::detail
