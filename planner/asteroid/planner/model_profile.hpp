#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace asteroid::planner {

/// Measured cost of one layer of a chain model on the profiling device.
///
/// Times are sampled at a few micro-batch sizes; `forward_time(b)` and
/// `backward_time(b)` interpolate linearly between samples and extrapolate
/// from the last two points, so the planner can ask for any share size.
struct layer_profile {
  std::string name;
  /// Ascending micro-batch sizes at which the times were measured.
  std::vector<int64_t> batch_sizes;
  /// Seconds per forward pass at each of `batch_sizes`.
  std::vector<double> forward_s;
  /// Seconds per backward pass at each of `batch_sizes`.
  std::vector<double> backward_s;
  /// Bytes of this layer's output activation for one sample.
  int64_t output_bytes_per_sample = 0;
  /// Bytes of trainable parameters (and buffers).
  int64_t param_bytes = 0;
  /// Bytes of optimizer state for the parameters (e.g. 1x for momentum SGD).
  int64_t optimizer_state_bytes = 0;
  /// Peak temporary memory per sample while computing the layer, beyond what
  /// its forward stashes and its parameters' gradients (the incoming and
  /// outgoing gradients, backward's scratch).
  int64_t working_bytes_per_sample = 0;
  /// Bytes per sample kept alive from this layer's forward to its backward
  /// (all intermediate tensors autograd saves). 0 means unknown: the cost
  /// model then uses `output_bytes_per_sample`.
  int64_t stashed_bytes_per_sample = 0;
  /// Seconds per training step of the optimizer's update of this layer's
  /// parameters, whatever the batch size (every replica of a stage applies
  /// it to all of the stage's weights). 0 means unmeasured (analytic
  /// profiles, PipeDream imports, profiles written before it was measured).
  double optimizer_step_s = 0.0;

  /// `stashed_bytes_per_sample`, or `output_bytes_per_sample` when unknown.
  int64_t stash_bytes_per_sample() const {
    return stashed_bytes_per_sample > 0 ? stashed_bytes_per_sample
                                        : output_bytes_per_sample;
  }

  double forward_time(double batch) const;
  double backward_time(double batch) const;
};

/// A chain model's profile: what the planner knows about the model.
struct model_profile {
  std::string model;
  /// The device type the times were measured on (speed factor 1.0).
  std::string device;
  /// Bytes of one input sample (what the first stage receives).
  int64_t input_bytes_per_sample = 0;
  std::vector<layer_profile> layers;
  /// Whether the runtime copies each stage's weights and optimizer state
  /// between steps (the snapshots fault tolerance replicates: a job's
  /// `snapshot_every` > 0 with a recovery that restores from them), which
  /// the memory model then counts. A property of the job more than of the
  /// model: the supervisor sets it from the job.
  bool state_snapshots = false;

  int num_layers() const { return static_cast<int>(layers.size()); }
  /// One training step of the whole model at `batch` samples on the
  /// profiled device: every layer's forward and backward time.
  double step_time(double batch) const;
};

/// Layers [first, end) of `p` as one layer, for a stage that computes them
/// in one pass: forward and backward times are the layers' sums at every
/// batch size any of them was sampled at (so interpolating the sum agrees
/// with summing the interpolations between samples), parameter, optimizer
/// and stash bytes and the optimizer-step times are summed, working bytes are
/// the largest, the output is layer end - 1's. Throws
/// std::invalid_argument for an empty or out-of-range [first, end).
layer_profile range_profile(const model_profile& p, int first, int end);

} // namespace asteroid::planner
