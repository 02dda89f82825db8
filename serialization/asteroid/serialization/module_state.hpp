#pragma once

#include "asteroid/serialization/tensor_wire.hpp"

#include <torch/torch.h>

namespace asteroid::serialization {

/// Captures a module's parameters and buffers (deep copies), named by their
/// dotted paths ("layers.0.weight"), parameters first, in registration order.
named_tensors capture_module_state(const torch::nn::Module& module);

/// Copies saved values into a module's parameters and buffers in place.
///
/// Strict: every parameter and buffer must be present with the same shape,
/// and no extra names are allowed; otherwise throws std::invalid_argument
/// naming the tensor. Values are converted to each tensor's dtype and device.
void load_module_state(torch::nn::Module& module, const named_tensors& state);

} // namespace asteroid::serialization
