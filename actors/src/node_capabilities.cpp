#include "asteroid/actors/node_capabilities.hpp"

#include <algorithm>
#include <set>
#include <stdexcept>

namespace asteroid::actors {

int64_t plannable_memory_bytes(const nlohmann::json& caps) {
  const auto budget = caps.value("memory_bytes", int64_t{4} << 30);
  if (budget <= 0) // no budget: nothing to take from
    return budget;
  return std::max<int64_t>(
    budget - std::max<int64_t>(caps.value("library_workspace_bytes", int64_t{0}), 0), 0);
}

bool computes_on_gpu(const nlohmann::json& caps) {
  return caps.value("compute_device", std::string("cpu")).rfind("cuda", 0) == 0;
}

bool known_speeds(const std::string& speeds) {
  return speeds == "auto" || speeds == "reported" || speeds == "measured";
}

bool speeds_to_measure(const std::string& speeds, const std::vector<nlohmann::json>& caps) {
  if (!known_speeds(speeds))
    throw std::invalid_argument("job speeds '" + speeds
                                + "': expected auto, reported or measured");
  if (speeds == "reported" || caps.empty())
    return false;
  if (speeds == "measured")
    return true;
  // A slowdown relates nodes of one kind of device; across kinds only a
  // measurement does (the device's name; "cuda:0" and "cuda:1" are a kind).
  std::set<std::string> kinds;
  for (const auto& c : caps)
    kinds.insert((computes_on_gpu(c) ? "gpu " : "cpu ")
                 + c.value("device_name", std::string("cpu")));
  return kinds.size() > 1;
}

} // namespace asteroid::actors
