#pragma once
/// \file
/// Measuring the cluster from the supervisor (issue #4): a layer profile
/// taken *on a node* (its device, its emulated slowdown) and the bandwidth and
/// latency of every link between nodes, measured over the path the runtime's
/// tensors take (the data plane where both nodes have one, else CAF messages;
/// `link_probe_options::path`).
#include "asteroid/actors/node_capabilities.hpp"
#include "asteroid/actors/protocol.hpp"
#include "asteroid/planner/cluster.hpp"
#include "asteroid/planner/model_profile.hpp"
#include "asteroid/training/profiler.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <string>
#include <vector>

namespace asteroid::actors {

/// Profiles zoo (or registered) model `model` on the node behind `device`.
/// The node applies its own emulated slowdown and records its name as the
/// profile's device. Throws std::runtime_error naming the node on failure.
planner::model_profile profile_on_node(caf::actor_system& sys,
                                       const device_actor& device,
                                       const std::string& model,
                                       const nlohmann::json& model_options,
                                       const training::profiler_options& opts,
                                       std::chrono::milliseconds timeout);

/// How links are probed.
struct link_probe_options {
  /// Payload of the bandwidth probe; the node grows it (up to 64x) while it
  /// adds less than a quarter of a tiny round trip.
  int64_t bytes = int64_t{1} << 20;
  int repeats = 3;                  ///< the fastest round trip is kept
  std::chrono::milliseconds timeout{10000};
  /// The path tensors take: the data plane where both nodes have one.
  probe_path path = probe_auto;
  /// > 0: the bandwidth is this many payloads of exactly `bytes`, sent back
  /// to back as a stage streams its micro-batches, over the time until the
  /// last is echoed (no growth; `repeats` unused). 0: from round trips.
  int stream = 0;
};

/// One directed link, measured from its sending node.
struct link_measurement {
  double latency_s = 0;     ///< half the round trip of a tiny message
  /// probe bytes / (big round trip - tiny one), or streamed bytes / time
  double bandwidth_Bps = 0;
};

/// Measures the link from node `from` to the node at `to_endpoint`.
link_measurement measure_link(caf::actor_system& sys, const device_actor& from,
                              const std::string& to_endpoint,
                              const link_probe_options& opts);

/// Whether the data-plane path from node `from` to the node at
/// `to_endpoint` carries a probe now: one 16 KiB frame and its echo on the
/// same connection, so both directions, within at most 4 x 500 ms. Blocks:
/// for a helper actor. Why paths are probed: cut_paths.hpp. `why`, when
/// given, says why a probe did not get through.
bool path_answers(caf::actor_system& sys, const device_actor& from,
                  const std::string& to_endpoint, std::string* why = nullptr);

/// A cluster of `devices` (capabilities from each node: name, memory, speed
/// = reference slowdown / node slowdown) with a measured link matrix.
/// `reference` is the device whose speed is 1 (the profiled one). With
/// `capabilities`, every node's `ast_caps` answer is left there, in order.
planner::cluster measure_cluster(caf::actor_system& sys,
                                 const std::vector<device_actor>& devices,
                                 const std::vector<std::string>& endpoints,
                                 int reference, const link_probe_options& opts,
                                 std::vector<nlohmann::json>* capabilities = nullptr);

} // namespace asteroid::actors
