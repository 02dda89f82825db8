#pragma once

#include "asteroid/planner/instruction.hpp"

#include <vector>

namespace asteroid::planner {

/// How a send behaves when the receiver is not ready.
enum class send_semantics {
  /// The sender goes on at once; the message waits in the receiver's mailbox
  /// (the actor runtime; DeepSpeed with non-blocking p2p). Receives block.
  buffered,
  /// The sender blocks until the receiver reaches the matching receive
  /// (blocking NCCL/gloo send without batching). Stricter than `buffered`.
  rendezvous,
};

/// What a successful check observed.
struct schedule_check_report {
  /// Instructions executed, all streams together.
  int instructions = 0;
  /// Most messages waiting in one channel (one receiving replica's view of
  /// one (from, to, kind) link) at any time of the checked execution.
  int max_channel_depth = 0;
  /// Most micro-batches in flight (forward done, backward not yet) on any
  /// replica.
  int max_in_flight = 0;
};

/// Checks that a set of streams is a valid, deadlock-free schedule of one
/// mini-batch with `micro_batches` micro-batches, or throws
/// std::runtime_error naming the stream (`s1r0`), the instruction and the
/// problem.
///
/// Per stream: every micro-batch is forwarded and backwarded exactly once,
/// forward before backward; each forward on a non-first stage is preceded by
/// the receive of its activation and followed (non-last stage) by its send;
/// likewise for gradients; the first and last stages load each micro-batch
/// before its forward; peers are the neighbouring stages; the stream ends
/// with `all_reduce` then `optimizer_step`, each present once.
///
/// Across streams: executes all streams together, matching each receive
/// with the send of the same (kind, micro-batch) on the same link in FIFO
/// order. A message from stage s is delivered once every replica of s sent
/// it (the shares are merged), and each replica of the receiving stage gets
/// a copy. Fails on a receive that finds a different micro-batch at the head
/// of its channel, on a deadlock (no stream can progress, listing where each
/// stuck stream waits), or on messages left unconsumed.
///
/// With `buffered` sends, the streams form a Kahn process network (blocking
/// receives on fixed channels), so one successful execution proves that
/// every interleaving completes: this single run is a proof, not a sample.
schedule_check_report check_schedule(
    const std::vector<instruction_stream>& streams, int micro_batches,
    send_semantics semantics = send_semantics::buffered);

/// The per-stream half of `check_schedule`: what one replica can check of
/// the stream it was given, without its peers' streams (every micro-batch
/// loaded, received, computed and sent once and in order; peers are the
/// neighbouring stages of a pipeline of `num_stages`; ends with ALLREDUCE,
/// STEP). Throws std::runtime_error naming the instruction and the problem.
void check_stream(const instruction_stream& stream, int num_stages,
                  int micro_batches);

} // namespace asteroid::planner
