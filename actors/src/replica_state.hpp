#pragma once
// The state of one replica actor, shared by the files that implement it:
// replica.cpp (the actor shell: handlers, spawning), stage_executor.cpp (the
// instruction stream), replica_links.cpp (sends, receives, credits),
// ring_all_reduce.cpp and device_clock.cpp (compute time, emulation).
#include "emulated_time.hpp"

#include "asteroid/actors/channel.hpp"
#include "asteroid/actors/protocol.hpp"
#include "asteroid/actors/replica_spec.hpp"
#include "asteroid/kernels/bucket.hpp"
#include "asteroid/kernels/wire_codec.hpp"
#include "asteroid/models/sequential_model.hpp"
#include "asteroid/planner/instruction.hpp"
#include "asteroid/training/loss.hpp"

#include <caf/all.hpp>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace asteroid::actors {

class data_plane;

namespace detail {

/// Rows [begin, end) of a micro-batch.
struct span {
  int64_t begin = 0;
  int64_t end = 0;
  bool empty() const { return end <= begin; }
};

/// The rows of each replica of a group whose shares are `shares`.
std::vector<span> spans(const std::vector<int64_t>& shares);
span overlap(span a, span b);

/// The LibTorch half of a replica, fixed at deployment: model range,
/// optimizer, loss, instruction stream, row spans.
struct engine {
  replica_spec spec;
  /// Only the stage's layers are built (sequential_model.hpp).
  models::sequential_model model{nullptr};
  /// Where the model and every tensor of a step live (the spec's
  /// `compute_device`); what arrives is moved here on receipt.
  torch::Device device{torch::kCPU};
  /// Bytes of every tensor the model holds (parameters and buffers), as
  /// reported each step: what a stage-only model saves is visible there.
  int64_t model_bytes = 0;
  /// What the node predicted the replica holds at its peak
  /// (replica_footprint.hpp), reported each step next to the measured peak.
  int64_t predicted_bytes = 0;
  std::vector<torch::Tensor> params;
  /// The layers keep buffers (BatchNorm's running statistics): a forward
  /// pass changes them even when no optimizer step follows.
  bool has_buffers = false;
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  /// Resolved on the last stage only (the others never compute a loss).
  training::loss_function loss;
  /// How this replica's activations, gradients and all-reduce chunks cross
  /// links (from the spec); the residuals of error feedback when the spec asks for it,
  /// kept across steps and re-configurations.
  kernels::wire_codec activation_codec = kernels::wire_codec::none;
  kernels::wire_codec gradient_codec = kernels::wire_codec::none;
  kernels::wire_codec all_reduce_codec = kernels::wire_codec::none;
  std::unique_ptr<kernels::error_feedback> gradient_feedback;
  /// By replica of the previous / next stage: 1 where the link carries
  /// float32 whatever the codecs say (the spec's plain_prev, plain_next).
  std::vector<char> plain_prev, plain_next;
  /// The codec of the activations (`activation`) or gradients crossing the
  /// link to or from replica `q` of the neighbouring stage they go to or
  /// come from.
  kernels::wire_codec link_codec(bool activation, bool with_next, int q) const {
    const auto& plain = with_next ? plain_next : plain_prev;
    if (plain.at(static_cast<size_t>(q)))
      return kernels::wire_codec::none;
    return activation ? activation_codec : gradient_codec;
  }
  bool first = false;
  bool last = false;
  span mine;
  std::vector<span> prev;
  std::vector<span> next;
  /// This process's data plane (null: every tensor rides in CAF messages).
  std::shared_ptr<data_plane> dp;
  /// Set by this node's device when a recovery begins (`ast_halt`); null
  /// for a replica spawned without a device.
  std::shared_ptr<const std::atomic<int64_t>> halt_below;
  /// This node's device actor (null: spawned without one).
  device_actor home;
  /// The process of the supervisor that deployed it: with the replica's
  /// own process, the only one whose control messages it obeys (none: any,
  /// for a replica spawned outside a node).
  caf::node_id supervisor_node;
};

/// A recovery towards a newer generation has begun: this replica runs no
/// further op of its interrupted step (it is re-configured or stopped next).
inline bool superseded(const engine& e) {
  return e.halt_below
         && e.spec.generation < e.halt_below->load(std::memory_order_relaxed);
}

struct replica_state {
  std::shared_ptr<engine> e;
  std::vector<replica_actor> prev;
  std::vector<replica_actor> next;
  replica_actor ring_next;
  /// The supervisor's step driver.
  step_driver_actor supervisor;
  device_actor home;   ///< this node's device actor: local snapshots
  /// The state a piecewise read (`ast_state`) is under way of.
  std::shared_ptr<const std::string> state_read;
  device_actor backup; ///< the device keeping this stage's replica
  /// The processes of the peers the supervisor named: credits may come
  /// from them too.
  std::set<caf::node_id> peer_nodes;
  /// How tensors reach each peer, by (peer_role, index): chosen once, when
  /// the supervisor names the peer (`ast_peer`).
  std::map<std::pair<int, int>, channel_ptr> channels;

  // -- the step being executed --
  int64_t step = -1;
  bool running = false;
  bool failed = false;
  size_t pc = 0;
  std::set<int64_t> starts;
  /// Where each started step's passes are reported (the job's micro-batch
  /// relay; none: the job runs without micro-batch actors).
  std::map<int64_t, micro_batch_relay_actor> report_to;
  /// Passes of the running step finished since the last report (each
  /// `2 * micro-batch + pass`): one message takes them all when the step
  /// has waited a while or ends (flush_progress).
  std::vector<int32_t> unreported;
  /// Counts the waits of the stream: a reminder to report names the wait
  /// it was sent for (stage_executor.cpp).
  int64_t waits = 0;
  /// A reminder is on its way (at most one: each is a timer).
  bool reminder_pending = false;
  /// The first stage's inputs and the last stage's labels, by (step, mb).
  std::map<std::pair<int64_t, int>, torch::Tensor> inputs, labels;
  std::vector<torch::Tensor> x, y, in, out, grad_out;
  std::map<std::tuple<int64_t, int, int>, torch::Tensor> acts, grads;
  std::map<std::pair<int64_t, int>, torch::Tensor> ar_in;
  std::vector<int> unacked_next, unacked_prev;
  std::set<int> served; // receivers already served by the current send
  int ar_k = -1;
  torch::Tensor ar_flat;
  /// The all-reduce's buckets; one bucket stays between steps as the
  /// gradients' storage (ring_all_reduce.cpp).
  std::vector<kernels::bucket> ar_buckets;
  std::vector<torch::Tensor> ar_grads;

  /// The newest version this replica has sent a snapshot of (-1: none).
  int64_t snapshotted = -1;
  /// The last step whose optimizer step this replica applied (-1: none):
  /// a recovery that replays from a version at or before it rolls back.
  int64_t last_finished = -1;
  /// A roll-back to a snapshot is on its way from the home device: no step
  /// begins until it is loaded.
  bool restoring = false;

  // -- metrics of the step (reset when its report is sent: a snapshot taken
  // after the report counts in the next one) --
  double step_start_us = 0;
  double busy_s = 0;
  double overrun_s = 0; ///< compute beyond the emulated time (compute())
  double loss = 0;
  int64_t progress_sent = 0;    ///< passes reported to micro-batch actors
  int64_t progress_messages = 0; ///< the messages that carried them
  nlohmann::json events = nlohmann::json::array();
  std::map<std::string, int64_t> bytes;
  int max_unacked = 0;
  std::chrono::steady_clock::time_point blocked_since;
  bool blocked = false;

  /// Frees the step's per-micro-batch tensors and with them their autograd
  /// graphs (a step ends, or a recovery abandons it).
  void drop_micro_batch_tensors() {
    x.clear();
    y.clear();
    in.clear();
    out.clear();
    grad_out.clear();
  }
  /// Zeroes what only a report carries; begin_step zeroes the rest.
  void reset_report_metrics() {
    busy_s = 0;
    overrun_s = 0;
    progress_sent = 0;
    progress_messages = 0;
    events = nlohmann::json::array();
  }
};

/// A replica's own view of itself: the typed interface `replica_actor`
/// (protocol.hpp) with its state.
using replica_self = replica_actor::stateful_base<replica_state>;

/// "s1r0@node2" (the spec's label) or "s1r0".
std::string name_of(const engine& e);
/// "s0r1->s1r0": the key of a link's bytes in reports.
std::string link_name(int s0, int r0, int s1, int r1);

/// Logs `what`, marks the replica failed and tells the supervisor.
void fail(replica_self* self, const std::string& what);

} // namespace detail
} // namespace asteroid::actors
