#pragma once
// Memory a node holds resident on a job's `hog` fault (fault injection:
// memory pressure from another program on the device), until the job frees
// the node. Shared between the device actor and the detached worker that
// writes the memory, so the device keeps answering heartbeats meanwhile.
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace asteroid::actors::detail {

class memory_hog {
public:
  /// Allocates `bytes` more and writes every page (so they are resident);
  /// "" when held, else why not: at most half of this machine's memory in
  /// all, so that an injected fault cannot take the machine down with the
  /// node. `who` names the node in the log.
  std::string hold(int64_t bytes, const std::string& who);
  /// Gives everything back, and drops a hog still being written.
  void release();

private:
  std::mutex mu_;
  std::vector<std::unique_ptr<char[]>> blocks_;
  int64_t bytes_ = 0; ///< held, and being written
  uint64_t epoch_ = 0; ///< releases so far: a hog written across one is dropped
};

} // namespace asteroid::actors::detail
