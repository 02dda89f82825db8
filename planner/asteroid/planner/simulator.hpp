#pragma once

#include "asteroid/planner/instruction.hpp"
#include "asteroid/planner/pipeline_steps.hpp"
#include "asteroid/planner/plan.hpp"
#include "asteroid/planner/schedule.hpp"

#include <vector>

namespace asteroid::planner {

/// How the two directions of a stage boundary share the link.
enum class link_model {
  /// One transfer at a time per boundary, activations and gradients alike:
  /// a communication step is busy E_f + E_b per micro-batch, as in the 2P-1
  /// step model, and as on a shared Wi-Fi medium.
  half_duplex,
  /// One transfer at a time per boundary *direction* (switched Ethernet):
  /// activations and gradients overlap.
  full_duplex,
};

struct simulator_options {
  link_model links = link_model::half_duplex;
  /// Seconds per `load_micro_batch` (0: data is prefetched).
  double load_s = 0.0;
  /// Seconds per `optimizer_step`, on top of the compute step's
  /// `device_update_s` (`update_s`) for the replica.
  double optimizer_s = 0.0;
  /// Keep the event list (off for sweeps).
  bool record_events = true;
};

/// One interval of simulated work.
struct sim_event {
  enum class resource { device, link };
  resource where = resource::device;
  /// Device events: the stream's stage. Link events: the upstream stage of
  /// the boundary.
  int stage = 0;
  /// Replica index (device events; -1 on links).
  int replica = -1;
  /// Cluster device (device events; -1 on links or unbound streams).
  int device = -1;
  /// forward, backward, load_micro_batch, all_reduce, optimizer_step on
  /// devices; send_activation or send_grad on links.
  op kind = op::forward;
  int micro_batch = -1;
  /// Link events: the receiving stage.
  int peer_stage = -1;
  double start_s = 0.0;
  double end_s = 0.0;
};

/// What one stream (one replica on one device) did during the round.
struct device_stats {
  int stage = 0;
  int replica = 0;
  int device = -1;
  /// Seconds computing: loads, forwards, backwards, optimizer step.
  double busy_s = 0.0;
  /// Seconds in the group's all-reduce.
  double allreduce_s = 0.0;
  /// `busy_s / round_s`.
  double utilisation = 0.0;
  /// When its last instruction ended.
  double finish_s = 0.0;
  /// Most micro-batches whose forward ran and backward had not yet.
  int peak_in_flight = 0;
};

/// What one link resource did.
struct link_stats {
  /// Upstream stage of the boundary.
  int boundary = 0;
  /// `half_duplex`: -1 (both directions); `full_duplex`: 0 activations,
  /// 1 gradients.
  int direction = -1;
  double busy_s = 0.0;
  double utilisation = 0.0;
};

struct simulation_result {
  /// Makespan of the mini-batch: the last instruction or transfer to end.
  double round_s = 0.0;
  /// Fraction of device time neither computing nor all-reducing:
  /// 1 - sum(busy + allreduce) / (devices * round). For P equal stages,
  /// free links and no all-reduce it is (P-1)/(M+P-1).
  double bubble_fraction = 0.0;
  /// One entry per stream, in the order of the input streams.
  std::vector<device_stats> devices;
  std::vector<link_stats> links;
  /// Every interval, ordered by start time (empty unless recorded).
  std::vector<sim_event> events;
};

/// Executes instruction streams under the step times of the cost model.
///
/// Discrete-event simulation. Each stream runs its instructions in order on
/// its device: forward/backward of replica r of stage s take
/// `device_forward_s[r]` / `device_backward_s[r]` of the compute step of s
/// (`forward_s` / `backward_s` when the per-device lists are empty). Sends
/// cost the device nothing. A boundary transfer of a micro-batch starts when
/// every replica of the sending stage has sent its share and the link is
/// free (FIFO in ready time), lasts the communication step's `forward_s`
/// (activations) or `backward_s` (gradients), and then satisfies the
/// receive of every replica of the receiving stage. `all_reduce` is a
/// collective of the stage's group: it starts when the last replica arrives
/// and lasts the compute step's `allreduce_s`. Each replica's
/// `optimizer_step` lasts its `device_update_s` (`update_s` when the list is
/// empty) plus `simulator_options::optimizer_s`.
///
/// Throws std::invalid_argument when a stage has no compute step, a
/// boundary with traffic has no communication step, or a step's per-device
/// lists do not match the stage's replicas; std::runtime_error naming the
/// stuck streams when the streams deadlock.
simulation_result simulate(const std::vector<instruction_stream>& streams,
                           const pipeline_steps& steps,
                           const simulator_options& options = {});

/// Compiles `p` with `kind` (micro-batch count from the plan) and simulates
/// it.
simulation_result simulate(const plan& p, const pipeline_steps& steps,
                           schedule_kind kind,
                           const simulator_options& options = {});

} // namespace asteroid::planner
