#pragma once

#include "asteroid/serialization/tensor_wire.hpp"

#include <torch/torch.h>

#include <string>
#include <utility>
#include <vector>

namespace asteroid::serialization {

/// Everything needed to resume a torch optimizer bit-identically.
///
/// Parameters are identified by position: index `i` counts the parameters of
/// all param groups in order. Tensors are named "param.<i>.<field>" where
/// field is `momentum_buffer` (SGD) or `step`, `exp_avg`, `exp_avg_sq`,
/// `max_exp_avg_sq` (Adam; `step` is a 0-dim int64). Parameters that have no
/// state yet (never stepped) have no entries. Hyper-parameters are named
/// "group.<g>.<option>" (lr, momentum, betas as beta1/beta2, ...), so
/// learning-rate schedules that edited the options are resumed too.
struct optimizer_state {
  std::string kind; ///< "sgd" or "adam"
  named_tensors tensors;
  std::vector<std::pair<std::string, double>> hyper_params;
};

/// Captures the state of an SGD or Adam optimizer (deep copies of buffers,
/// unless `how` is tensor_capture::share).
///
/// Throws std::invalid_argument for other optimizer types.
optimizer_state capture_optimizer_state(const torch::optim::Optimizer& opt,
                                        tensor_capture how = tensor_capture::copy);

/// Loads state captured by capture_optimizer_state() into a freshly built
/// optimizer over parameters of the same shapes, in the same order.
///
/// Replaces all existing state. Throws std::invalid_argument naming the entry
/// when the kind, group or parameter count, or a buffer shape does not match.
void load_optimizer_state(torch::optim::Optimizer& opt, const optimizer_state& state);

} // namespace asteroid::serialization
