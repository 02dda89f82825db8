#pragma once
// Comma-separated lists on the benchmarks' command lines.
#include <sstream>
#include <string>
#include <vector>

namespace asteroid::bench {

/// "a,b,c" -> {"a", "b", "c"}; empty items are dropped.
inline std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in{text};
  std::string item;
  while (std::getline(in, item, ','))
    if (!item.empty())
      out.push_back(item);
  return out;
}

} // namespace asteroid::bench
