#pragma once
// An environment of the paper (examples/clusters/env-X-Ymbps.json) as local
// node processes under time dilation (time_dilation.hpp): the planner's
// cluster with speeds relative to the fastest device (= this machine) or,
// with absolute speeds, to this machine, and the node options that emulate
// it.
#include "../command_lists.hpp"
#include "time_dilation.hpp"

#include "asteroid/actors/job.hpp"
#include "asteroid/actors/node.hpp"
#include "asteroid/planner/cluster.hpp"
#include "asteroid/planner/json_io.hpp"

#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace asteroid::bench {

struct emulated_env {
  planner::cluster cluster; ///< what the planner sees (undilated)
  double dilation = 1;
  actors::local_cluster::options nodes;
};

/// `absolute`: the cluster's speeds are already relative to this machine
/// (`planner::absolute_speeds`): a device may then be faster than this
/// machine, and D is at least the fastest device's speed so that every node
/// is slowed, never sped up. Otherwise the fastest device runs at this
/// machine's speed (speeds relative to the fastest).
inline emulated_env emulate(planner::cluster c, const std::string& name, double dilation,
                            double cpu_budget, uint16_t base_port, bool absolute) {
  emulated_env env;
  env.cluster = std::move(c);
  double fastest = 0;
  for (auto& d : env.cluster.devices)
    fastest = std::max(fastest, d.speed);
  std::vector<double> speeds;
  for (auto& d : env.cluster.devices) {
    if (!absolute)
      d.speed /= fastest;
    speeds.push_back(d.speed);
  }
  env.dilation = dilation > 0 ? dilation : auto_dilation(speeds, cpu_budget);
  if (absolute && env.dilation < fastest) {
    if (dilation > 0)
      throw std::runtime_error(name + ": --dilation " + std::to_string(dilation) +
                               " is below the fastest device's speed relative to this "
                               "machine (" + std::to_string(fastest) + ")");
    env.dilation = fastest;
  }
  auto& o = env.nodes;
  o.exe = ASTEROID_CLI_PATH;
  o.nodes = static_cast<int>(env.cluster.devices.size());
  o.base_port = base_port;
  for (auto s : speeds)
    o.slowdowns.push_back(env.dilation / s);
  for (auto& d : env.cluster.devices)
    o.memory.push_back(d.memory_bytes);
  // One rate per node: the environments' links are uniform.
  double rate_Bps = env.cluster.bandwidth_Bps.size() > 1 ? env.cluster.bandwidth_Bps[0][1] : 0;
  o.link_rates_mbps = {rate_Bps * 8e-6 / env.dilation};
  return env;
}

/// The environment `name` (examples/clusters/NAME.json), speeds relative to
/// its fastest device.
inline emulated_env emulate(const std::string& name, double dilation, double cpu_budget,
                            uint16_t base_port) {
  return emulate(planner::load_cluster_file(std::string(ASTEROID_SOURCE_DIR) +
                                            "/examples/clusters/" + name + ".json"),
                 name, dilation, cpu_budget, base_port, false);
}

/// A job running `plan` of `model` on emulated nodes, as the baselines run:
/// no replication traffic, no recovery, and a heartbeat tolerance (15 s) that
/// dilated steps on a deliberately loaded machine do not trip.
inline actors::job_spec emulated_job(const std::string& model, const planner::plan& plan,
                                     const std::vector<std::string>& nodes) {
  actors::job_spec job;
  job.model = model;
  job.batch_size = plan.batch_size;
  job.micro_batches = plan.micro_batches;
  job.plan = plan;
  job.optimizer.momentum = 0.9;
  job.evaluate = false;
  job.progress = 0;
  job.nodes = nodes;
  job.measure_links = false;
  job.fault_tolerance.snapshot_every = 0;
  job.fault_tolerance.recovery = "none";
  job.fault_tolerance.heartbeat_ms = 1000;
  job.fault_tolerance.heartbeat_misses = 15;
  return job;
}

} // namespace asteroid::bench
