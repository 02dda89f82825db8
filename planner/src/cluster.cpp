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

bool cluster::uniform_links() const {
  const int n = size();
  double bw = -1.0, lat = -1.0;
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b) {
      if (a == b)
        continue;
      if (bw < 0.0) {
        bw = bandwidth(a, b);
        lat = latency(a, b);
      } else if (bandwidth(a, b) != bw || latency(a, b) != lat) {
        return false;
      }
    }
  return true;
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
