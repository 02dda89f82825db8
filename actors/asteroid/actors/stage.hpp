#pragma once
/// \file
/// Stage actors (`stage_actor`): one per layer range of the running plan, in
/// the supervisor's process. A stage actor owns its replica group: which
/// device runs which replica with which share, the all-reduce ring over
/// them, and where replica 0's snapshots go (the backup device). A
/// deployment tells it the group the new plan wants; it keeps the members
/// that stay (the same actor, re-configured, its state kept or rolled back),
/// stops the ones that leave and has the chosen nodes' device actors build
/// the new ones, all members at once. A stage whose layers the new plan
/// keeps keeps its actor, so after a loss only the groups that lost a
/// member change (docs/runtime.md, "Stage actors").
///
/// Its replicas are its own: they stop when it stops, and a replica that a
/// node hands over after the deployment that asked for it was abandoned
/// (a device was lost meanwhile) is stopped on arrival instead of running
/// on unnoticed.
#include "asteroid/actors/protocol.hpp"
#include "asteroid/actors/stage_deployment.hpp"

#include <caf/all.hpp>

#include <string>
#include <vector>

namespace asteroid::actors {

using wire_atom = caf::atom_constant<caf::atom("ast_wire")>;

/// The stage actor's interface. It lives in the supervisor's process and is
/// published nowhere: only the supervisor talks to it.
using stage_actor = caf::typed_actor<
  /// Deploys the group of a `stage_deployment` (JSON), given the device
  /// actors of its members (in member order) and the encoded stage state
  /// for members that restore from neither a kept replica nor their node's
  /// snapshots (empty when none needs it): error, the members' replicas in
  /// member order, and a report (JSON: "kept" entries as the supervisor's
  /// records carry them, "restored_locally", "shipped", "rebuilt").
  caf::replies_to<deploy_atom, std::string, std::vector<caf::actor>,
                  std::string>::with<std::string, std::vector<caf::actor>,
                                     std::string>,
  /// Links every member: to the supervisor (where reports go), to the
  /// neighbouring stages' replicas and to its ring successor, and replica 0
  /// to the backup device. Fields: supervisor, previous stage's replicas,
  /// next stage's replicas (in replica order), backup device actor (null:
  /// none), `stage_wiring` JSON. Replies (error, empty on success) once
  /// every link message is sent: a step started after the reply reaches
  /// the replicas after their links (messages through one process's
  /// connection to a node keep their order).
  caf::replies_to<wire_atom, caf::actor, std::vector<caf::actor>,
                  std::vector<caf::actor>, caf::actor,
                  std::string>::with<std::string>,
  /// Stops its replicas and quits once no build it asked for is pending.
  caf::reacts_to<stop_atom>,
  /// The same, when the devices listed (by index) are lost: builds asked of
  /// them are not waited for (nor those of a device whose connection
  /// closes meanwhile).
  caf::reacts_to<stop_atom, std::vector<int32_t>>>;

stage_actor spawn_stage(caf::actor_system& sys, int stage, int first_layer,
                        int end_layer);

} // namespace asteroid::actors
