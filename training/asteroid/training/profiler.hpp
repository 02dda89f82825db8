#pragma once

#include "asteroid/models/sequential_model.hpp"
#include "asteroid/planner/model_profile.hpp"
#include "asteroid/training/trainer_options.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace asteroid::training {

/// How `profile_model` measures.
struct profiler_options {
  /// Micro-batch sizes to time each layer at (ascending).
  std::vector<int64_t> batch_sizes{1, 8, 32};
  /// Untimed runs before measuring, and timed runs (the median is kept).
  int warmup = 2;
  int repeats = 5;
  /// Emulated slowdown: reported times are measured times × this factor, so
  /// a fast core can stand in for a slower device. 1 = no emulation.
  double slowdown = 1.0;
  /// Optimizer whose state size is reported (SGD momentum: 1× the
  /// parameters; Adam: 2×) and whose step is timed.
  optimizer_kind optimizer = optimizer_kind::sgd;
  /// Name recorded as the profile's device.
  std::string device = "local";
  /// Where the layers run (kernels/compute_device.hpp): the model is moved
  /// there, and on CUDA each timing waits for the kernels and the working
  /// memory is the caching allocator's.
  torch::Device compute_device = torch::kCPU;
  /// Inference: time forward passes only, in eval mode without autograd,
  /// as an inference stage computes (backward times are recorded as 0, the
  /// stash is what a forward held beyond its output, so 0, and the working
  /// memory is the forward's alone). Training forwards differ: they keep
  /// what the backward needs and run dropout.
  bool forward_only = false;
};

/// Measures every layer of `model` on `options.compute_device`: forward and
/// backward time at each batch size, output activation bytes, parameter and
/// optimizer-state bytes, the bytes its forward leaves alive for the backward
/// (stash) and the peak working memory on top of them (LibTorch's CPU
/// allocator, or on CUDA its caching allocator); in training, the time of
/// the optimizer's step over the layer's parameters (once per training
/// step, whatever the batch size; the weights are restored afterwards).
///
/// Each layer runs alone on random inputs of its declared shape (token ids
/// for a model whose input dtype is int64), with `requires_grad` inputs for
/// all but the first layer, as a pipeline stage would (with
/// `forward_only`: without autograd, as an inference stage). The model is
/// left in training mode with its gradients cleared (eval mode with
/// `forward_only`).
planner::model_profile profile_model(models::sequential_model& model,
                                     const std::string& model_name,
                                     const profiler_options& options = {});

} // namespace asteroid::training
