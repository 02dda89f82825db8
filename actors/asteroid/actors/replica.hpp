#pragma once
/// \file
/// Stage replicas: one per device per stage, executing the instruction
/// stream shipped in its spec on its share of every micro-batch.
#include "asteroid/actors/fwd.hpp"
#include "asteroid/actors/protocol.hpp"
#include "asteroid/actors/replica_spec.hpp"

#include <caf/all.hpp>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

namespace asteroid::actors {

/// Spawns a replica on a detached thread (LibTorch work must not block the
/// scheduler). `state` is an encoded stage state (stage_state.hpp) covering
/// its layers, with or without optimizer state; `home` is the device actor
/// that keeps its local snapshots (may be null).
/// Throws std::invalid_argument naming the problem for a bad spec/state.
/// With `dp`, the replica receives tensors from its process's data plane
/// and its channels to peers whose data endpoint the supervisor gave
/// (`ast_peer`) are TCP on it (channel.hpp). With `halt_below`, set by the
/// device (`ast_halt`), a replica whose generation is below that value stops
/// at its next op instead of finishing an interrupted step. With
/// `supervisor_node`, the replica obeys control messages (peers, starts,
/// re-configurations, state reads, slowdowns, stops) only from that process
/// and its own, and credits also from its peers' processes; without, from
/// anyone.
///
/// Only the stage's layers are built. A replica whose predicted footprint
/// (replica_footprint.hpp), with `spec.memory_committed`, exceeds
/// `spec.memory_budget` is refused (std::invalid_argument naming the stage,
/// the bytes and the budget) before its state is decoded; `footprint`, when
/// given, receives the prediction.
replica_actor spawn_replica(caf::actor_system& sys, const replica_spec& spec,
                            const std::string& state, device_actor home = {},
                            std::shared_ptr<data_plane> dp = {},
                            std::shared_ptr<const std::atomic<int64_t>> halt_below = {},
                            caf::node_id supervisor_node = {},
                            replica_footprint* footprint = nullptr);

/// The encoded stage state of `replica` (weights and optimizer state), read
/// piece by piece (`ast_state`), each piece within `timeout`. Throws
/// std::runtime_error with CAF's error, or naming what the replica sent
/// that does not add up. Each piece is a timed request, whose timeout CAF
/// 0.17 delivers to `self` even after the answer: call it from a
/// short-lived blocking actor (a scoped_actor of its own); the supervisor
/// reads states without timed requests (supervisor::state_of).
std::string read_replica_state(caf::blocking_actor* self, const replica_actor& replica,
                               std::chrono::milliseconds timeout);

} // namespace asteroid::actors
