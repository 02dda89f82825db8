#pragma once

#include "asteroid/training/trainer_options.hpp"

#include <torch/torch.h>

#include <memory>
#include <vector>

namespace asteroid::training {

/// Builds the optimizer described by `options` over `params`.
std::unique_ptr<torch::optim::Optimizer>
make_optimizer(const optimizer_options& options,
               std::vector<torch::Tensor> params);

} // namespace asteroid::training
