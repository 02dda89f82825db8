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
  std::lock_guard<std::mutex> lock{mu_};
  if (physical <= 0 || bytes > physical / 2 - bytes_)
    return who + " refused a memory hog of " + std::to_string(bytes)
           + " bytes: at most half of this machine's " + std::to_string(physical)
           + " bytes in all (" + std::to_string(bytes_) + " held)";
  std::unique_ptr<char[]> block{new (std::nothrow) char[static_cast<size_t>(bytes)]};
  if (!block)
    return who + " cannot allocate " + std::to_string(bytes) + " bytes for a memory hog";
  std::memset(block.get(), 1, static_cast<size_t>(bytes)); // resident from here
  blocks_.push_back(std::move(block));
  bytes_ += bytes;
  spdlog::warn("{}: holding {} more bytes resident (injected fault), {} in all", who,
               bytes, bytes_);
  return {};
}

void memory_hog::release() {
  std::lock_guard<std::mutex> lock{mu_};
  blocks_.clear();
  bytes_ = 0;
}

int64_t memory_hog::bytes() const {
  std::lock_guard<std::mutex> lock{mu_};
  return bytes_;
}

} // namespace asteroid::actors::detail
