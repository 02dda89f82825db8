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

double cluster::compressed_ratio(traffic t) const {
  switch (t) {
    case traffic::activations:
      return activation_wire_ratio;
    case traffic::gradients:
      return gradient_wire_ratio;
    case traffic::all_reduce:
      return all_reduce_wire_ratio;
  }
  return 1.0;
}

double cluster::wire_ratio_at(double link_Bps, traffic t) const {
  return compresses(link_Bps) ? compressed_ratio(t) : 1.0;
}

double cluster::wire_ratio(int from, int to, traffic t) const {
  return compressed(from, to) ? compressed_ratio(t) : 1.0;
}

} // namespace asteroid::planner
