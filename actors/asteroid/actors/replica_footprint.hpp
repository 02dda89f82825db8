#pragma once
/// \file
/// The memory a replica is predicted to hold at its peak, from its stage-only
/// model and its spec: what a node compares with its budget before it lets a
/// deployment run (docs/runtime.md, "Memory budgets").
#include "asteroid/actors/replica_spec.hpp"
#include "asteroid/models/sequential_model.hpp"

#include <algorithm>
#include <cstdint>
#include <string>

namespace asteroid::actors {

struct replica_footprint {
  int64_t weights = 0;     ///< parameters and buffers of the stage's layers
  int64_t gradients = 0;   ///< one per parameter
  int64_t optimizer = 0;   ///< SGD's momentum, or Adam's two moments
  /// What the in-flight micro-batches keep from forward to backward: the
  /// received input and every layer's output, for the replica's rows.
  int64_t activations = 0;
  /// Tensors on the replica's links: the activations it sends on and the
  /// gradients it sends back, for every in-flight micro-batch.
  int64_t link_buffers = 0;
  /// The copy of the weights and optimizer state a snapshot takes, where the
  /// job snapshots (`replica_spec::snapshot_every` > 0). Snapshots are taken
  /// between steps, when no activation is held, so the larger of this and
  /// activations plus link buffers counts.
  int64_t snapshot_copy = 0;
  /// What the GPU libraries keep for the replica's compute thread
  /// (kernels::library_workspace_bytes; 0 on the CPU).
  int64_t library_workspace = 0;
  /// Micro-batches the replica's instruction stream holds between their
  /// forward and backward pass at once.
  int in_flight = 0;
  /// The largest payload a peer sends the replica in one data-plane frame
  /// (its rows of a micro-batch's input, activation, gradient or labels, or
  /// an all-reduce chunk), with room for the encoding: its data plane
  /// refuses a larger one unread (data_plane::add_sink). Not memory it
  /// holds beyond the parts above.
  int64_t largest_frame = 0;

  int64_t total() const {
    return weights + gradients + optimizer + library_workspace
           + std::max(activations + link_buffers, snapshot_copy);
  }
};

/// The footprint of the replica `spec` describes, whose model `stage`
/// builds at least its layers.
replica_footprint predict_footprint(const models::sequential_model& stage,
                                    const replica_spec& spec);

/// "1.2 GiB (weights 300 MiB, gradients ..., 2 micro-batches in flight)".
std::string describe(const replica_footprint& f);

/// Throws std::invalid_argument naming the stage, the predicted bytes and
/// the budget when `f` and what the node's other replicas are predicted to
/// hold (`spec.memory_committed`) exceed `spec.memory_budget`.
void check_budget(const replica_footprint& f, const replica_spec& spec);

} // namespace asteroid::actors
