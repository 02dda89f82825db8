#include "process_memory.hpp"

#include <fstream>
#include <sstream>
#include <string>

namespace asteroid::actors::detail {

int64_t resident_peak_bytes() {
  std::ifstream status{"/proc/self/status"};
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) != 0)
      continue;
    std::istringstream fields{line.substr(6)};
    int64_t kib = -1;
    if (fields >> kib && kib >= 0)
      return kib * 1024;
    return -1;
  }
  return -1;
}

} // namespace asteroid::actors::detail
