#pragma once
/// \file
/// One stage of an inference pipeline (EdgePipe), hosted on a node's device:
/// it receives a request's input or the previous stage's output, computes
/// its layers without gradients and sends the result on, to the next stage
/// or, from the last stage, back to the server (server.hpp). A request is
/// a tensor_message whose `step` is the request's id. The stage receives
/// into its own queue and computes one request at a time (receive, compute,
/// send, as PipeEdge's runtime does); the queue holds at most
/// `queue_limit` requests, and the server never has more in flight.
#include "asteroid/actors/inference_spec.hpp"
#include "asteroid/actors/protocol.hpp"

#include <caf/all.hpp>

#include <cstdint>
#include <memory>
#include <string>

namespace asteroid::actors {

/// A stage's own cue to compute its oldest queued request.
using compute_atom = caf::atom_constant<caf::atom("ast_comp")>;

/// Control messages act only when they come from the node's own process or
/// the serving job's (the node's claimant); tensors only when they name the
/// job. Anything else is logged and dropped.
using inference_stage_actor = caf::typed_actor<
  /// Where its outputs go (peer_next: the next stage; peer_supervisor: the
  /// server), with the receiver's data endpoint ("": a CAF message):
  /// "" once wired, else why not.
  caf::replies_to<peer_atom, int32_t, int32_t, caf::actor, std::string>::with<std::string>,
  /// A request's input (kind input, stage 0) or the previous stage's
  /// output (kind activation); `step` is the request id.
  caf::reacts_to<tensor_atom, serialization::tensor_message>,
  caf::reacts_to<compute_atom>,
  /// What it did so far, as JSON: requests, busy and host seconds, queue
  /// depth (mean and largest at each compute), refused requests, the
  /// transport of its output link ("tcp" or "caf"), and trace events of
  /// the first requests.
  caf::replies_to<stats_atom>::with<std::string>,
  /// New emulated slowdown (permille >= 1000).
  caf::reacts_to<slow_atom, int32_t>,
  caf::reacts_to<stop_atom>>;

/// The memory a stage is predicted to hold: its weights, `queue_limit`
/// inputs waiting plus the one it computes, and every layer's output for
/// one request (what a forward pass without gradients may hold at once, at
/// most).
struct inference_footprint {
  int64_t weights = 0;
  int64_t queues = 0;
  int64_t working = 0;
  /// The largest payload a peer sends the stage in one frame (one request's
  /// input), with room for the encoding.
  int64_t largest_frame = 0;
  int64_t total() const { return weights + queues + working; }
};

/// Builds the stage `spec` describes with `weights` (an encoded stage state
/// of its layers: stage_state.hpp) and spawns it on its own thread. With
/// `dp`, its inputs may come on the data plane. Throws
/// std::invalid_argument naming the stage, its predicted bytes and the
/// budget when the node's `spec.memory_budget` (minus `committed` bytes of
/// the node's other stages) cannot hold it, or naming what is wrong with
/// the weights.
inference_stage_actor spawn_inference_stage(caf::actor_system& sys,
                                            const inference_spec& spec,
                                            const std::string& weights,
                                            std::shared_ptr<data_plane> dp,
                                            caf::node_id server_node,
                                            int64_t committed = 0,
                                            inference_footprint* footprint = nullptr);

} // namespace asteroid::actors
