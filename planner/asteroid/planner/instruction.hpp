#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace asteroid::planner {

/// What one instruction of a pipeline schedule does (after DeepSpeed's
/// `PipeInstruction`s).
///
/// In a hybrid plan a stage is a group of replicas; every replica runs the
/// same stream on its own share of each micro-batch. The split of a
/// micro-batch among the replicas of the receiving stage, and the merge of the
/// sending stage's shares, follow from the plan's `shares`, so they are not
/// spelled out in the instructions: `send_activation` means "send my rows of
/// this micro-batch's boundary activation to the replicas of `peer_stage` that
/// need them".
enum class op {
  /// Fetch the micro-batch's inputs (first stage) or labels (last stage).
  load_micro_batch,
  forward,
  /// Asynchronous: the sender does not wait for the receiver.
  send_activation,
  /// Blocks until the activation of `micro_batch` from `peer_stage` arrived.
  recv_activation,
  backward,
  /// Asynchronous, like `send_activation`.
  send_grad,
  /// Blocks until the gradient of `micro_batch` from `peer_stage` arrived.
  recv_grad,
  /// Ring all-reduce of the stage's gradients inside its group (collective).
  all_reduce,
  optimizer_step,
};

/// One instruction. `micro_batch` and `peer_stage` are -1 where they do not
/// apply (`all_reduce`, `optimizer_step`; `peer_stage` of compute ops).
struct instruction {
  op kind = op::forward;
  int micro_batch = -1;
  int peer_stage = -1;

  bool operator==(const instruction& other) const {
    return kind == other.kind && micro_batch == other.micro_batch &&
           peer_stage == other.peer_stage;
  }
  bool operator!=(const instruction& other) const { return !(*this == other); }
};

/// Short mnemonic of an op: LOAD, FWD, SEND_ACT, RECV_ACT, BWD, SEND_GRAD,
/// RECV_GRAD, ALLREDUCE, STEP.
std::string to_string(op kind);
/// The op of a mnemonic (`to_string(op)`); throws std::invalid_argument
/// naming the unknown text and the known mnemonics.
op parse_op(const std::string& mnemonic);
/// Number of ops: `static_cast<size_t>(kind) < num_ops` for every op (dispatch
/// tables indexed by op).
constexpr size_t num_ops = static_cast<size_t>(op::optimizer_step) + 1;

/// One instruction without its owner, e.g. `FWD mb=2` or
/// `SEND_ACT mb=0 to=s2`.
std::string to_string(const instruction& instr);

/// True for ops that carry a micro-batch index.
bool has_micro_batch(op kind);
/// True for sends and receives.
bool is_communication(op kind);

/// The instructions executed by one replica of one stage in one mini-batch.
struct instruction_stream {
  int stage = 0;
  /// Index of the replica inside the stage's group.
  int replica = 0;
  /// Cluster index of the device running it (-1 when not bound to a device).
  int device = -1;
  std::vector<instruction> instructions;
};

/// One instruction per line, each prefixed by its owner: `s1r0: FWD mb=2`.
std::string to_string(const instruction_stream& stream);

/// The whole stream on one line, for eyeballing the order:
/// `s1r0: F0 F1 B0 F2 B1 F3 B2 B3 AR STEP` (compute and all-reduce only).
std::string to_compact_string(const instruction_stream& stream);

} // namespace asteroid::planner
