#pragma once
/// \file
/// Jobs: the supervisor side of the runtime. A job file names a model, a
/// dataset, hyper-parameters, the nodes and a plan (or a planner); the
/// supervisor connects to the nodes, deploys one replica per device per
/// stage, feeds the data (this process is the *primary*: the data never
/// leaves it except as the first stage's inputs and the last stage's labels),
/// drives the iterations and collects metrics.
#include "asteroid/actors/heartbeat_monitor.hpp"
#include "asteroid/actors/protocol.hpp"
#include "asteroid/actors/wire_compression.hpp"
#include "asteroid/data/dataset.hpp"
#include "asteroid/models/sequential_model.hpp"
#include "asteroid/planner/plan.hpp"
#include "asteroid/training/evaluate.hpp"
#include "asteroid/training/loss.hpp"
#include "asteroid/training/trainer_options.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace asteroid::actors {

/// The longest wait a job or serve file may name (a week, in ms): far
/// beyond any real timeout, and far inside what the clocks hold (a deadline
/// of 9.2e12 ms overflows steady_clock's nanoseconds and is already past).
inline constexpr int64_t longest_wait_ms = int64_t{7} * 24 * 3600 * 1000;

/// How a job survives device losses (issue #5; docs/fault_tolerance.md).
struct fault_tolerance_options {
  /// Supervisor pings every device this often ...
  int64_t heartbeat_ms = 250;
  /// ... and declares it dead after this many intervals without an answer.
  int heartbeat_misses = 4;
  /// Snapshot every K steps (weights + optimizer state) to the node itself
  /// and to the backup device of the neighbouring stage; 0: no snapshots
  /// (then a loss fails the job, as before).
  int64_t snapshot_every = 1;
  /// "replay": patch the plan (move only the lost work), restore from the
  /// snapshots, replay from the last common version; "replay_no_rebalance":
  /// the same without re-scheduling (a lost member's share goes whole to its
  /// group's first survivor; the paper's Figure-17 baseline); "replan": run the
  /// planner on the survivors and redistribute every stage; "restart":
  /// the baseline, stop everything, re-plan, reload the latest checkpoint
  /// file and re-run the steps since; "none": fail the job.
  std::string recovery = "replay";
  /// With "replay": when the patched plan's predicted round is more than
  /// this times the fresh plan's, re-plan instead (needs a profile).
  double replan_threshold = 1.5;
  /// Re-plan when a device's compute time per step drifts from its value
  /// right after the deployment by more than this factor (either way) for
  /// `drift_steps` steps in a row; 0: never. Needs a profile.
  double drift_factor = 2.0;
  int drift_steps = 3;
  /// Re-plan when a node reports a measured peak (its resident high-water
  /// mark above what the process held when the job claimed it) over its
  /// memory budget: the planner then sees that node's budget shrunk by the
  /// overshoot. Again only when the peak grows 10 % past the last trigger.
  /// false: reported in the iteration records only. Needs a profile.
  bool memory_replan = true;
  /// "restart" baseline: checkpoint file and period in steps.
  std::string checkpoint_path;
  int64_t checkpoint_every = 10;
};

/// The job's path window (heartbeat_monitor.hpp's path_window_ms says why).
inline int64_t path_window_ms(const fault_tolerance_options& ft) {
  return path_window_ms(ft.heartbeat_ms, ft.heartbeat_misses);
}

/// A scripted fault (fault injection for experiments and tests).
struct fault_spec {
  int64_t step = 0;     ///< inject while this step runs (first time only)
  int64_t delay_ms = 0; ///< after the step's start
  int node = 0;         ///< index into `nodes`
  /// "kill" (SIGKILL), "stop" (SIGSTOP), "cont" (SIGCONT), "slow" (set the
  /// emulated slowdown to `slowdown`), "cut" / "heal" (take the node's link
  /// down / up again), "reset" (break every data-plane connection of the
  /// node, as a network fault would: the links heal, no recovery), "hog"
  /// (the node holds `bytes` more memory resident until the job ends:
  /// memory pressure from outside the job; as `step` starts, whatever
  /// `delay_ms`: the step waits until the node holds it). Signals need the node's pid, so they work for nodes on
  /// this machine only; cuts need a node that reports a link interface
  /// (`asteroid node --link-interface`, set by the emulated testbed).
  std::string action = "kill";
  double slowdown = 1.0;
  int64_t bytes = 0; ///< "hog" only
  /// "step": while `step` runs (`delay_ms` after its start). "recovery": as
  /// the first recovery of a failure at `step` or later starts deploying
  /// its plan: a second loss in the middle of a recovery, as when devices on
  /// one power strip go down one by one. "start": as the job first deploys
  /// (before step 0). `delay_ms` counts for "step" only.
  std::string when = "step";
};

/// A training job (the `asteroid job --config` file; see docs/runtime.md).
struct job_spec {
  std::string model = "cnn";
  nlohmann::json model_options = nlohmann::json::object();
  std::string dataset = "fashion-mnist";
  std::string data_dir;
  int64_t train_limit = 0;       ///< use the first N training samples (0: all)
  int64_t test_limit = 0;        ///< evaluate on the first N test samples
  int64_t synthetic_count = 1024;///< size of a synthetic training set
  int64_t batch_size = 64;
  int micro_batches = 4;
  training::optimizer_options optimizer;
  int64_t epochs = 1;
  int64_t max_steps = -1;        ///< stop after N steps (-1: all epochs)
  uint64_t seed = 1;
  std::vector<std::string> nodes;///< "host:port" of each device
  /// Member folder of the cluster's credentials (`asteroid keys`) this
  /// program connects with; empty: plain TCP, which nodes with credentials
  /// refuse (credentials.hpp).
  std::string credentials;
  /// A checkpoint this job wrote (`fault_tolerance.checkpoint`): the job
  /// goes on from the step it holds, with its weights and optimizer state,
  /// instead of from the model's first weights (`asteroid job --resume`).
  /// Same job file, same plan: the same weights as a run never interrupted.
  std::string resume_from;
  std::optional<planner::plan> plan;
  std::string planner;           ///< used when `plan` is empty ("asteroid")
  /// Layer profile for the planner (`asteroid profile -o`); empty: profile
  /// the model here with training::profile_model.
  std::string profile_path;
  /// Planner mode: profile on this node (index into `nodes`, with its
  /// emulated slowdown) instead of in this process (-1). With a
  /// `profile_path`, the node whose times the file holds: node speeds and
  /// emulated compute times are relative to its slowdown.
  int profile_node = -1;
  /// Planner mode: measure every link between nodes (bandwidth, latency)
  /// instead of assuming 1 Gbit/s everywhere.
  bool measure_links = true;
  /// Planner mode: the links carry both directions at once (switched
  /// Ethernet), so a stage boundary is priced at the larger of its
  /// activations and gradients per micro-batch, not their sum
  /// (planner::cluster::full_duplex_links); false, the default, suits a
  /// shared Wi-Fi medium and never prices a plan faster than full-duplex
  /// pricing does.
  bool full_duplex_links = false;
  /// Planner mode: where each node's speed comes from. "reported": the
  /// profiled device's speed scaled by the nodes' emulated slowdowns;
  /// "measured": the model is also timed on every node (with its slowdown)
  /// at the job's micro-batch, and a node's speed is the profile's time
  /// over its own, so a GPU node or a faster machine gets its larger share;
  /// "auto" (the default): measured when the nodes name different compute
  /// devices (a GPU beside CPUs, two kinds of GPU), else reported.
  std::string speeds = "auto";
  /// How long a forward or backward pass takes on an emulated device (a
  /// node with a slowdown): "measured" (the default), the slowdown times
  /// the time this host took, so the host's own speed and load show
  /// through; "profile", the slowdown times the job's profile's time for
  /// the pass's layers and rows (the `profile` file, else the model
  /// profiled at the start; one taken on `profile_node` counts as that
  /// node's times, as the planner's speeds do), so every device computes at exactly its stated
  /// speed however the host's speed moves (where the host takes longer, the
  /// replicas report the excess as overrun). For emulated clusters: a node
  /// without a slowdown is held to the profile's time too. The optimizer
  /// step is measured either way.
  std::string compute_time = "measured";
  /// Tensors between node processes on the nodes' data planes
  /// (data_plane.hpp); false: in CAF messages, as before the data plane.
  bool data_plane = true;
  std::string schedule = "1f1b";
  /// Loss of the last stage (training::find_loss: "cross_entropy", or one the
  /// program registered with training::register_loss in every process that
  /// hosts a last-stage replica).
  std::string loss = training::default_loss;
  int credit_window = 0;         ///< 0: number of stages + 1
  std::string metrics_path;      ///< JSON lines ("-": stdout, empty: none)
  std::string trace_path;        ///< Chrome trace of the first trace_steps
  int64_t trace_steps = 5;
  bool evaluate = true;
  /// At the end, fetch the weights of every replica of a replicated stage,
  /// not only replica 0's, and report how far they are apart
  /// (`job_result::replica_divergence`; they should be equal). Costs one
  /// more state transfer per extra replica.
  bool check_replicas = false;
  int progress = -1;             ///< progress line: -1 auto, 0 off, 1 on
  int64_t connect_timeout_ms = 3000;
  int64_t step_timeout_ms = 120000;
  /// Send the next step's start while this one runs, when nothing has to
  /// happen between the two (no checkpoint, re-plan, admission or scripted
  /// fault due): replicas go on without waiting a round trip to the
  /// supervisor. Training is the same either way.
  bool run_ahead = true;
  /// An actor per micro-batch of each step (micro_batch.hpp), told of every
  /// forward and backward pass; a recovery asks them what was in flight
  /// where. False: no such actors (the runtime bench compares the two).
  bool micro_batch_actors = true;
  /// When a replica tells the micro-batch actors of the passes it finished:
  /// N > 0 (default 20) once a wait has lasted N ms, and when the step
  /// ends; 0 each time its stream waits for a message. Why 20: at every
  /// wait, the README's job sends 18 reports a step to the primary instead
  /// of 4; there 20 ms took less CPU in three of four measured sets (0.7-
  /// 3.9 %) and brought the job from 0.942 to 0.991 of 35ba801's samples/s
  /// (docs/runtime.md, "Micro-batch actors"). The price: a recovery that
  /// starts within 2N ms of the loss may not yet know the last passes (its
  /// `in_flight` says which N it ran with).
  int64_t micro_batch_report_ms = 20;
  /// How activations and gradients cross links (wire_compression.hpp);
  /// uncompressed by default, which is bit-exact.
  wire_compression compression;
  fault_tolerance_options fault_tolerance;
  std::vector<fault_spec> faults;
};

/// Whether `value` is one of job_spec::compute_time's: measured or profile.
bool known_compute_time(const std::string& value);

/// Parses a job (`where` leads every error message).
job_spec parse_job(const nlohmann::json& j, const std::string& where);
job_spec load_job_file(const std::string& path);

/// What a job reports.
struct job_result {
  int64_t steps = 0;
  double seconds = 0;
  double samples_per_s = 0;
  double last_loss = 0;
  training::eval_result test;
  planner::plan plan;
  /// Weights after training, gathered from replica 0 of every stage.
  models::sequential_model model{nullptr};
  /// With `job_spec::check_replicas`: the largest absolute difference
  /// between a tensor of any replica's final state and replica 0's of the
  /// same stage (0: the replicas agree exactly); -1 when not checked.
  double replica_divergence = -1;
  /// One record per iteration (what the metrics file gets).
  std::vector<nlohmann::json> iterations;
  /// The speed the planner was given for each node (1: the device the
  /// profile was taken on) and where it came from ("reported" or
  /// "measured"); empty for a job with a fixed plan.
  std::vector<double> device_speeds;
  std::string speeds_source;
  /// One record per injected fault, detection and recovery.
  std::vector<nlohmann::json> fault_events;
  /// Ended before its last step because it was asked to (a stop message to
  /// its supervisor actor, supervisor_actor.hpp).
  bool stopped = false;
};

/// Runs `job` on `devices` (handles from `connect` or `spawn_device`),
/// starting from the weights of `model` and reading `train`. `test` may be
/// null. Throws std::runtime_error naming the node, stage or layer at fault.
/// A thin client of the supervisor actor (supervisor_actor.hpp: spawn, start,
/// await) that blocks the calling thread; a program that wants to watch or
/// stop the job talks to the supervisor actor itself.
job_result run_job(caf::actor_system& sys, const job_spec& job,
                   const std::vector<device_actor>& devices,
                   models::sequential_model model,
                   std::shared_ptr<data::dataset> train,
                   std::shared_ptr<data::dataset> test);

/// Checks that `p` fits a model of `model`'s layers; throws
/// std::invalid_argument naming the stage and the layer.
void check_plan_fits(const planner::plan& p,
                     const models::sequential_model& model,
                     const std::string& model_name, int num_devices);

/// The network settings of a program that runs `job`: its credentials
/// (`job.credentials`), if any, for `configure`.
net_options net_of(const job_spec& job);

/// The whole `asteroid job --config FILE` path: loads data and model,
/// connects to `job.nodes` (failing fast naming an unreachable one), runs;
/// the same thin client, with its own actor system.
job_result run_job(const job_spec& job);
/// As run_job(job), and stops the job (after its running step) once
/// `stop_wanted` returns true; it is asked every 100 ms (await_job).
job_result run_job(const job_spec& job, const std::function<bool()>& stop_wanted);
job_result run_job_file(const std::string& path);

} // namespace asteroid::actors
