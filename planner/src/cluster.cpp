#include "asteroid/planner/cluster.hpp"

namespace asteroid::planner {

cluster cluster::uniform(std::string name, std::vector<device_spec> devices,
                         double link_bps, double latency) {
  cluster c;
  c.name = std::move(name);
  c.devices = std::move(devices);
  auto n = c.devices.size();
  c.bandwidth_Bps.assign(n, std::vector<double>(n, link_bps / 8.0));
  c.latency_s.assign(n, std::vector<double>(n, latency));
  return c;
}

} // namespace asteroid::planner
