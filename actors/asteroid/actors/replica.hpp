#pragma once
/// \file
/// Stage replicas: one per device per stage, executing that stage's
/// instruction stream (planner/schedule.hpp) on its share of every
/// micro-batch.
#include "asteroid/models/sequential_model.hpp"
#include "asteroid/training/trainer_options.hpp"

#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace asteroid::actors {

class data_plane;

/// Everything a replica needs; travels to the device as JSON text.
struct replica_spec {
  std::string model;                  ///< name for make_model / a factory
  nlohmann::json model_options;       ///< training::to_json(model_options)
  int stage = 0;
  int num_stages = 1;
  int replica = 0;
  int first_layer = 0;
  int end_layer = 0;
  int64_t batch_size = 0;             ///< mini-batch size (loss scaling)
  int micro_batches = 1;
  std::vector<int64_t> shares;        ///< this stage's shares per replica
  std::vector<int64_t> prev_shares;   ///< previous stage's (empty if first)
  std::vector<int64_t> next_shares;   ///< next stage's (empty if last)
  std::string schedule = "1f1b";
  training::optimizer_options optimizer;
  /// Un-acknowledged micro-batches allowed per link and direction (credits).
  int credit_window = 4;
  /// Emulated slowdown: compute is padded to this factor × measured time.
  double slowdown = 1.0;
  /// Name for logs and traces ("s1r0@node2").
  std::string label;
  /// Per-receive limit: a replica waiting longer for a tensor reports a
  /// failure naming what it waited for.
  int64_t recv_timeout_ms = 60000;
  /// Deployment generation: bumped by every recovery, so that reports and
  /// failures of replicas from before a fault can be told apart.
  int generation = 0;
  /// Snapshot (weights + optimizer state) at the start of every step that
  /// is a multiple of this, to the home device and to the backup device
  /// (`peer_backup`); 0: never.
  int64_t snapshot_every = 0;
};

nlohmann::json to_json(const replica_spec& spec);
replica_spec replica_spec_from_json(const nlohmann::json& j);

/// Builds a model by name (make_model, or a factory registered below).
models::sequential_model build_model(const std::string& name,
                                     const nlohmann::json& options);

/// Registers a model factory for `build_model` (user models of the library
/// API; devices in other processes must register the same name).
void register_model_factory(
  const std::string& name,
  std::function<models::sequential_model(const nlohmann::json&)> factory);

/// Spawns a replica on a detached thread (LibTorch work must not block the
/// scheduler). `state` is an encoded stage state (stage_state.hpp) covering
/// its layers, with or without optimizer state; `home` is the device actor
/// that keeps its local snapshots (may be null).
/// Throws std::invalid_argument naming the problem for a bad spec/state.
/// With `dp`, the replica receives tensors from its process's data plane
/// and sends them there to peers the supervisor routed (`ast_route`).
caf::actor spawn_replica(caf::actor_system& sys, const replica_spec& spec,
                         const std::string& state, caf::actor home = {},
                         std::shared_ptr<data_plane> dp = {});

} // namespace asteroid::actors
