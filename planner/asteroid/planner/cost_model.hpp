#pragma once

#include <cstdint>
#include <vector>

#include "asteroid/planner/cluster.hpp"
#include "asteroid/planner/model_profile.hpp"
#include "asteroid/planner/pipeline_steps.hpp"
#include "asteroid/planner/plan.hpp"

namespace asteroid::planner {

/// Per-layer-range costs of a profile, precomputed for O(1) queries.
///
/// The planners ask for the cost of a layer range [first, end) at a share of
/// y samples millions of times; prefix sums over layers for every share
/// 0..max_share (and a range-max table for working memory) make each query a
/// subtraction. Shares above `max_share` fall back to summing the layers.
class cost_tables {
public:
  cost_tables(const model_profile& profile, int64_t max_share);

  int num_layers() const { return num_layers_; }
  int64_t max_share() const { return max_share_; }

  /// Forward seconds of layers [first, end) for y samples on the profiling device.
  double forward_s(int first, int end, int64_t y) const;
  /// Backward seconds of layers [first, end) for y samples on the profiling device.
  double backward_s(int first, int end, int64_t y) const;
  /// Parameter (weight) bytes of layers [first, end).
  int64_t param_bytes(int first, int end) const;
  /// Weights + gradients + optimizer state of layers [first, end).
  int64_t fixed_bytes(int first, int end) const;
  /// What a snapshot of layers [first, end) copies while it is taken: the
  /// weights (and buffers) and the optimizer state (the runtime captures a
  /// stage's state between steps, when no activation is held).
  int64_t snapshot_bytes(int first, int end) const;
  /// Bytes per sample one in-flight micro-batch keeps on a stage: its input
  /// (the received boundary activation) plus every layer's stash.
  int64_t activation_bytes_per_sample(int first, int end) const;
  /// Largest per-sample working memory of layers [first, end).
  int64_t working_bytes_per_sample(int first, int end) const;
  /// Bytes per sample entering layer `layer` (the model input for layer 0).
  int64_t boundary_bytes_per_sample(int layer) const;
  /// Seconds on the profiling device that a replica of layers [first, end)
  /// spends once per step besides its micro-batches: the optimizer's step
  /// (0 where the profile did not measure it).
  double update_s(int first, int end) const;

  /// Memory of a device running layers [first, end) on a share of y samples
  /// with `in_flight` micro-batches stashed: fixed + in_flight * activations
  /// * y + working * y (during a step); where the profile says the runtime
  /// snapshots the state, at least fixed + the snapshot's copy (between
  /// steps).
  int64_t memory_bytes(int first, int end, int64_t y, int in_flight) const;

  /// Largest y <= limit with memory_bytes(first, end, y, in_flight) <= budget;
  /// -1 when even y = 0 (weights, gradients, optimizer state) does not fit.
  /// Closed form of the binary search of Algorithm 1 (memory is affine in y).
  int64_t max_share_within(int first, int end, int in_flight, int64_t budget,
                           int64_t limit) const;

private:
  int num_layers_ = 0;
  int64_t max_share_ = 0;
  const model_profile* profile_ = nullptr;
  // fwd_[y * (L+1) + l] = sum of forward times of layers < l at share y.
  std::vector<double> fwd_;
  std::vector<double> bwd_;
  std::vector<int64_t> param_prefix_;
  std::vector<int64_t> fixed_prefix_;
  std::vector<int64_t> snapshot_prefix_;
  std::vector<int64_t> stash_prefix_;
  std::vector<double> optimizer_step_prefix_;
  std::vector<int64_t> working_max_; // [first * L + (end-1)]
  std::vector<int64_t> boundary_;
};

/// Number of micro-batches stage p (0-indexed) of P holds in flight under
/// 1F1B: min(P - p, M).
int in_flight_micro_batches(int stage, int num_stages, int micro_batches);

/// Seconds to move `bytes` (float32) of `what` from every device of `from`
/// to `to`: bytes over the slowest payload rate between the groups (each
/// link's bandwidth over its wire ratio, cluster::payload_rate) plus the
/// largest latency (0 bytes cost nothing).
double transfer_s(const cluster& c, const std::vector<int>& from,
                  const std::vector<int>& to, double bytes, traffic what);

/// Seconds to move a boundary of `bytes_per_sample` x rows from a group
/// holding rows by `from_shares` to one holding them by `to_shares`, as the
/// runtime does it: rows are laid out in share order in both groups, each
/// sender sends each receiver the rows both hold, every such piece at once
/// on its own link (the bandwidth matrix's), and a device in both groups
/// keeps its own rows. The slowest piece (bytes over its link's payload
/// rate plus its latency) sets the time. Never more than `transfer_s` of
/// the whole micro-batch; where one device's port carries several pieces
/// at once and is slower than their links together, the real time is up
/// to their sum (docs/planner.md, "Two predictions").
double pieces_transfer_s(const cluster& c, const std::vector<int>& from,
                         const std::vector<int64_t>& from_shares, const std::vector<int>& to,
                         const std::vector<int64_t>& to_shares, double bytes_per_sample,
                         traffic what);

/// How `make_steps` prices a communication step.
enum class boundary_pricing {
  /// The Asteroid paper's: the whole micro-batch's boundary over the slowest
  /// link between the two groups (`transfer_s`); what the planners rank by.
  whole_micro_batch,
  /// As the runtime sends it (`pieces_transfer_s`); what the simulated
  /// prediction uses.
  pieces,
};

/// `update_s` of layers [first, end) for the stage of `group`, on its
/// slowest device (speeds as `c`'s): what the stage adds after its ring
/// all-reduce.
double update_s(const cost_tables& tables, const cluster& c, int first, int end,
                const std::vector<int>& group);

/// Ring all-reduce seconds of `bytes` (float32) in `group`:
/// 2(g-1)/g * bytes * r / slowest link in the group + 2(g-1) * largest
/// latency, where r is that link's all-reduce wire ratio (a ring is
/// compressed as a whole); 0 for a group of one.
double allreduce_s(const cluster& c, const std::vector<int>& group, double bytes);

/// The cluster's `co_location_slowdown` when the plan uses more than one
/// device, else 1: what every compute step of the plan is slowed by.
double co_located_slowdown(const plan& p, const cluster& c);

/// The 2P-1 step model of a plan (the Asteroid paper's; the profile overload
/// validates the plan first): compute steps with per-device times
/// time(share)/speed x `co_located_slowdown`, ring all-reduce times, and
/// communication steps carrying one micro-batch's boundary activation.
pipeline_steps make_steps(const plan& p, const model_profile& profile, const cluster& c,
                          boundary_pricing links = boundary_pricing::whole_micro_batch);
pipeline_steps make_steps(const plan& p, const cost_tables& tables, const cluster& c,
                          boundary_pricing links = boundary_pricing::whole_micro_batch);

/// Round (mini-batch) latency of the step model under 1F1B.
///
/// With E(k) = E_f(k) + E_b(k) of step k, SFB = sum_k E(k),
/// Z = max_k (T_a(k) - sum_{j<k} E_b(j)) (T_a: the step's
/// `end_of_round_s`, all-reduce and update) and Pi the steady-state period
/// per micro-batch:
///   T = SFB + (M - 1) * Pi + Z.
/// Pi = max(D, window cycles): D = max_k E(k) is the busiest resource
/// (with full-duplex links a link's is max(E_f, E_b): its directions are
/// two resources); a
/// window cycle is a run of k = 2..M consecutive stages s..t with the links
/// between them, of period sum E / k. Under 1F1B, stage s may start a new
/// forward only after a backward, so k micro-batches circulate in such a
/// run and the run's round trip paces it (docs/schedules.md, "Agreement
/// with the analytic formula"). With Pi = D this is the paper's formula
/// plus the trip of the last micro-batch after the dominant step and back
/// (the `tail`, as in DAPPLE's ending phase): without it a 2-stage pipeline
/// with M = 1 would be predicted twice as fast as it is. See
/// docs/planner.md.
double round_latency(const pipeline_steps& steps);

/// `round_latency` of S steps given as arrays (forward, backward and
/// end-of-round seconds, `pipeline_step::end_of_round_s`; step 2s is stage
/// s, step 2s+1 the link after it),
/// for callers that evaluate many step lists (the exhaustive planner).
double round_latency(const double* forward_s, const double* backward_s,
                     const double* allreduce_s, int num_steps, int micro_batches,
                     bool full_duplex_links = false);

/// Summary of a pipeline's steps from which its round latency, and that of
/// the pipeline with one more stage in front, follow cheaply (the DP's
/// inner loop). Made for one micro-batch count M:
///   D = max step E, Pi = steady-state period (see `round_latency`),
///   Z = max_k (T_a(k) - sum_{j<k} E_b(j)), SFB = sum_k E(k),
///   U[t-1] = sum of E over the first t stages and the t-1 links between
///   them (t <= min(stages, M, max_window)), for the window cycles that a
///   new first stage starts.
/// Then round_latency = SFB + (M-1)*Pi + Z. Prepending costs
/// O(min(stages, M, max_window)); window cycles of more than `max_window`
/// stages are not tracked (the DP then underestimates Pi; `evaluate` is
/// exact).
struct pipeline_summary {
  static constexpr int max_window = 16;
  double D = 0.0, Pi = 0.0, Z = 0.0, SFB = 0.0;
  int micro_batches = 1;
  int stages = 0;
  double U[max_window] = {}; // zero past the entries described above

  /// A one-stage pipeline: compute step with forward f, backward b,
  /// all-reduce a, run with `micro_batches` micro-batches.
  static pipeline_summary stage(double f, double b, double a, int micro_batches);
  /// This pipeline behind a new first stage (f, b, a) and the communication
  /// step (cf, cb) between it and the old first stage (its directions two
  /// resources when `full_duplex_links`, as cluster::full_duplex_links).
  pipeline_summary prepend(double f, double b, double a, double cf, double cb,
                           bool full_duplex_links = false) const;
  /// Round latency.
  double latency() const { return SFB + (micro_batches - 1) * Pi + Z; }
};

/// Predicted peak memory per cluster device (0 for devices the plan leaves
/// idle): weights + gradients + optimizer state + K*activations(share) +
/// working(share), K = in_flight_micro_batches.
std::vector<int64_t> memory_per_device(const plan& p, const cost_tables& tables,
                                       const cluster& c);

/// Fills the plan's predicted round time, samples/s and memory per device;
/// throws `planner_error` (from `validate`) for a malformed plan.
void evaluate(plan& p, const model_profile& profile, const cluster& c);
void evaluate(plan& p, const cost_tables& tables, const cluster& c);

/// Throws `planner_error` naming the first device whose predicted memory
/// exceeds its budget, and by how many bytes (call after `evaluate`).
void check_memory(const plan& p, const cluster& c);

/// True when every device's predicted memory is within its budget.
bool fits_memory(const plan& p, const cluster& c);

} // namespace asteroid::planner
