#pragma once

#include "asteroid/models/model_options.hpp"
#include "asteroid/models/sequential_model.hpp"

namespace asteroid::models {

/// A multi-layer perceptron: `fc1` (flatten + linear + ReLU), one
/// linear + ReLU layer per further hidden size, then the linear `classifier`.
/// Defaults: 28x28x1 input, hidden sizes {256, 128} (784-256-128-10).
sequential_model make_mlp(const model_options& options);

/// A small CNN for 28x28 images without normalisation layers, so that a
/// pipelined run is bit-for-bit comparable with a single-device run:
/// conv1 (conv3x3 32 + ReLU + maxpool2), conv2 (conv3x3 64 + ReLU + maxpool2),
/// fc1 (flatten + linear 128 + ReLU), classifier (linear). Channel and hidden
/// widths scale with `width_mult`.
sequential_model make_cnn(const model_options& options);

/// `make_cnn` with a BatchNorm after each convolution.
sequential_model make_cnn_bn(const model_options& options);

} // namespace asteroid::models
