#pragma once
/// \file
/// Training losses by name. A job names its loss ("cross_entropy" unless it
/// says otherwise); the replicas of the last stage look it up when they are
/// deployed, so a program that registers a loss must do so in every process
/// that hosts a last-stage replica (as with models, model_registry.hpp).
#include <torch/torch.h>

#include <functional>
#include <string>
#include <vector>

namespace asteroid::training {

/// A loss over the rows of `output` (model outputs) against `target`: the
/// **sum** over the rows, a scalar. A sum, not a mean, because replicas of the
/// last stage hold unequal shares of each micro-batch: each divides its sum by
/// the mini-batch size, so the gradients of all replicas and micro-batches add
/// up to the gradient of the mini-batch mean, as on one device.
using loss_function =
  std::function<torch::Tensor(const torch::Tensor& output,
                              const torch::Tensor& target)>;

/// The loss every job uses unless it names another.
inline constexpr const char* default_loss = "cross_entropy";

/// The loss registered as `name`: built in, "cross_entropy" (class indices as
/// targets); others by `register_loss`. Throws std::invalid_argument naming
/// the unknown loss and the known ones.
loss_function find_loss(const std::string& name);

/// Registers (or replaces) a loss; thread-safe.
void register_loss(const std::string& name, loss_function loss);

/// Registered names, sorted.
std::vector<std::string> loss_names();

} // namespace asteroid::training
