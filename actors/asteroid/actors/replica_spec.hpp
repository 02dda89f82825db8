#pragma once
/// \file
/// What a device needs to build one replica of one stage: its layers, shares,
/// neighbours' shares, hyper-parameters and the instruction stream it runs.
/// The supervisor fills it and ships it as JSON in the deployment.
#include "asteroid/planner/instruction.hpp"
#include "asteroid/planner/model_profile.hpp"
#include "asteroid/training/loss.hpp"
#include "asteroid/training/trainer_options.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace asteroid::actors {

struct replica_spec {
  std::string model;                  ///< name for training::build_model
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
  /// The instructions this replica executes every step, compiled and checked
  /// by the supervisor (planner::compile_schedule, check_schedule); the
  /// replica checks them again on arrival (planner::check_stream).
  std::vector<planner::instruction> stream;
  /// Loss of the last stage (training::find_loss).
  std::string loss = training::default_loss;
  training::optimizer_options optimizer;
  /// Un-acknowledged micro-batches allowed per link and direction (credits).
  int credit_window = 4;
  /// Emulated slowdown: compute is padded to this factor × measured time
  /// (or × `emulated_compute`'s time of the pass).
  double slowdown = 1.0;
  /// job_spec::compute_time "profile": the stage's layers as one profiled
  /// layer (planner::range_profile); a forward or backward pass then lasts
  /// `slowdown` × the profile's time at its rows, whatever the host took.
  std::optional<planner::layer_profile> emulated_compute;
  /// Name for logs and traces ("s1r0@node2").
  std::string label;
  /// Per-receive limit: a replica waiting longer for a tensor reports a
  /// failure naming what it waited for.
  int64_t recv_timeout_ms = 60000;
  /// job_spec::micro_batch_report_ms: 0 reports passes at every wait, N
  /// once a wait has lasted N ms.
  int64_t report_after_ms = 0;
  /// The steps whose compute spans a step's report carries (steps before
  /// this one; -1: every step): job_spec::trace_steps when the job writes a
  /// trace, else 0. Nothing else reads them, and parsing them took about a
  /// tenth of the supervisor's process's CPU in the README's job.
  int64_t trace_steps = -1;
  /// Deployment generation: bumped by every recovery, so that reports and
  /// failures of replicas from before a fault can be told apart.
  int generation = 0;
  /// The job it serves (job_claim.hpp): it drops tensors of any other.
  int64_t job = 0;
  /// Snapshot (weights + optimizer state) at the start of every step that
  /// is a multiple of this, to the home device and to the backup device
  /// (`peer_backup`); 0: never.
  int64_t snapshot_every = 0;
  /// The node's memory budget in bytes (< 0: none). Set by the device that
  /// builds the replica from its own budget, whatever the supervisor sent.
  int64_t memory_budget = -1;
  /// Bytes already predicted for the node's other replicas of the same
  /// deployment generation (set by the device's builder).
  int64_t memory_committed = 0;
  /// Where the replica computes: "cpu" or "cuda:N". Set by the device that
  /// builds it from its own `--device`, whatever the supervisor sent:
  /// tensors reach and leave it through host memory, so one job's replicas
  /// may compute on different kinds of device.
  std::string compute_device = "cpu";
  /// How activations and gradients cross links between stages
  /// (kernels::wire_codec names; "none" is bit-exact), and whether the
  /// gradients' codec carries its error into the next step (error feedback).
  std::string activation_codec = "none";
  std::string gradient_codec = "none";
  bool error_feedback = false;
  /// How the chunks of this stage's ring all-reduce cross links (none,
  /// fp16 or bf16).
  std::string all_reduce_codec = "none";
  /// The previous and the next stage's replicas (by index) whose links to
  /// this one carry float32 whatever the codecs above say: the job
  /// compresses only its slow links ("compression": {"below_mbps"}).
  /// Both ends of a link are told the same, so they agree on its bytes.
  std::vector<int> plain_prev;
  std::vector<int> plain_next;
};

nlohmann::json to_json(const replica_spec& spec);
/// Reads and checks a spec (its stream with planner::check_stream); throws
/// std::invalid_argument starting "replica spec: " and naming the problem.
replica_spec replica_spec_from_json(const nlohmann::json& j);

} // namespace asteroid::actors
