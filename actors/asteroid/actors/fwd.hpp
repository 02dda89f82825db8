#pragma once
/// \file
/// Forward declarations of the runtime's types (as CAF's own `caf/fwd.hpp`
/// does), so a header that only names them need not pull in their
/// definitions. The actors' typed interfaces (`device_actor`,
/// `replica_actor`, `micro_batch_actor`, `micro_batch_relay_actor`,
/// `replica_builder_actor` in protocol.hpp, `stage_actor` in stage.hpp,
/// `supervisor_actor` in supervisor_actor.hpp) are not here: a
/// `caf::typed_actor` alias needs its message types complete.
#include <cstdint>
#include <memory>

namespace asteroid::actors {

// -- transport (channel.hpp, data_plane.hpp) --
class channel;
using channel_ptr = std::shared_ptr<channel>;
class data_plane;

// -- nodes and devices (node.hpp, snapshot_store.hpp) --
struct device_options;
struct node_options;
struct net_options;
class local_cluster;
class snapshot_store;

// -- replicas (replica_spec.hpp, replica.hpp) --
struct replica_spec;
struct replica_footprint;

// -- stages (stage_deployment.hpp, stage.hpp) --
struct stage_member;
struct stage_deployment;
struct stage_peer;
struct stage_wiring;

// -- micro-batches (micro_batch_progress.hpp, micro_batch.hpp) --
struct micro_batch_piece;
struct micro_batch_route;
class micro_batch_progress;

// -- jobs (job.hpp, job_state.hpp, supervisor_actor.hpp, heartbeat_monitor.hpp,
//    remote_probe.hpp) --
struct job_spec;
struct job_result;
struct job_outcome;
enum class job_state : int32_t;
class job_state_machine;
struct fault_spec;
struct fault_tolerance_options;
class heartbeat_monitor;
struct link_probe_options;
struct link_measurement;

} // namespace asteroid::actors
