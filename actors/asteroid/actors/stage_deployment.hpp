#pragma once
/// \file
/// What the supervisor asks of a stage actor (stage.hpp): the replica group
/// a deployment wants (`stage_deployment`) and who its members link to
/// (`stage_wiring`), both shipped as JSON. Pure data: no actors here.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace asteroid::actors {

/// One member of a stage's replica group, as a deployment wants it.
struct stage_member {
  int replica = 0;
  int device = 0;
  /// Data-plane endpoint of the member's node ("host:port"); empty where it
  /// has none: then every link of the member goes over CAF.
  std::string endpoint;
  /// The replica's spec (`replica_spec` as JSON, label included).
  nlohmann::json spec;
  /// The member already running on `device` may stay: it is re-configured
  /// with `spec` and rolls back to the deployment's version.
  bool keep = false;
  /// A replica built anew restores from its node's own snapshots at this
  /// version (no transfer); -1: from the state the deployment ships.
  int64_t restore_version = -1;
  /// How long the node may take to build it (its builds queue on the node).
  int64_t build_timeout_ms = 60000;
};

/// What a stage actor is asked to make of its group.
struct stage_deployment {
  int stage = 0;
  int first_layer = 0;
  int end_layer = 0;
  /// The version (step) the job resumes from: a kept member rolls back to
  /// it; -1: the first deployment, or one that keeps state as it is.
  int64_t version = -1;
  std::vector<stage_member> members;
};

nlohmann::json to_json(const stage_deployment& d);
/// Throws std::invalid_argument starting "stage deployment: ".
stage_deployment stage_deployment_from_json(const nlohmann::json& j);

/// A replica of a neighbouring stage, as wiring names it.
struct stage_peer {
  int replica = 0;
  int device = 0;
  std::string endpoint; ///< its node's data endpoint; empty: none
};

/// Who a stage's members are linked to besides each other.
struct stage_wiring {
  std::vector<stage_peer> prev; ///< the previous stage's replicas, in order
  std::vector<stage_peer> next; ///< the next stage's replicas, in order
  /// Device keeping replica 0's snapshots (-1: none), and its endpoint.
  stage_peer backup{0, -1, {}};
};

nlohmann::json to_json(const stage_wiring& w);
/// Throws std::invalid_argument starting "stage wiring: ".
stage_wiring stage_wiring_from_json(const nlohmann::json& j);

/// The data endpoint a link from a member on `from` (whose own node's
/// endpoint is `from_endpoint`) to a peer takes: the peer's, unless both
/// are on one device or either has no data plane (then CAF: empty).
std::string link_route(int from, const std::string& from_endpoint,
                       const stage_peer& to);

} // namespace asteroid::actors
