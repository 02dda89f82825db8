#pragma once

#include "asteroid/models/layer_range.hpp"

#include <torch/arg.h>

#include <cstdint>
#include <vector>

namespace asteroid::models {

/// Which stem a convolutional ImageNet architecture uses.
enum class stem_kind {
  /// `cifar` for image_size <= 64, `imagenet` otherwise.
  automatic,
  /// The published stem (e.g. ResNet's 7x7/2 conv + 3x3/2 max pool).
  imagenet,
  /// A stride-1 stem for 32x32 inputs, as in common CIFAR ports.
  cifar,
};

/// Options for `make_model`.
///
/// Fields documented with "0: model default" (or "< 0") take the value the
/// model's reference configuration uses; the table in `zoo.hpp` lists them.
struct model_options {
  /// Number of output classes.
  TORCH_ARG(int64_t, num_classes) = 10;
  /// Input image channels; 0: model default (1 for mlp/cnn, 3 otherwise).
  TORCH_ARG(int64_t, in_channels) = 0;
  /// Input height = width; 0: model default (28 mlp/cnn, 32 CNNs, 224 ViT).
  TORCH_ARG(int64_t, image_size) = 0;
  /// Channel width multiplier (CNNs) applied as the reference models do.
  TORCH_ARG(double, width_mult) = 1.0;
  /// Token sequence length (BERT).
  TORCH_ARG(int64_t, seq_len) = 128;
  /// Token vocabulary size (BERT).
  TORCH_ARG(int64_t, vocab_size) = 30522;
  /// Dropout probability; < 0: the model's reference value (0.2 MobileNetV2
  /// and EfficientNet-B1, 0.1 BERT, 0 ViT; mlp/cnn/resnet have none).
  TORCH_ARG(double, dropout) = -1.0;
  /// EfficientNet stochastic depth probability; < 0: reference value 0.2.
  TORCH_ARG(double, stochastic_depth) = -1.0;
  /// When >= 0, `make_model` calls `torch::manual_seed(seed)` first, so the
  /// initialisation is a function of the seed alone.
  TORCH_ARG(int64_t, seed) = -1;
  /// Stem of ResNet / MobileNetV2 / EfficientNet.
  TORCH_ARG(stem_kind, stem) = stem_kind::automatic;
  /// Hidden layer widths of `mlp`.
  TORCH_ARG(std::vector<int64_t>, hidden_sizes) = std::vector<int64_t>{256, 128};
  /// Transformer depth; 0: preset value.
  TORCH_ARG(int64_t, num_layers) = 0;
  /// Transformer hidden size; 0: preset value.
  TORCH_ARG(int64_t, hidden_dim) = 0;
  /// Attention heads; 0: preset value.
  TORCH_ARG(int64_t, num_heads) = 0;
  /// Feed-forward (intermediate) size; 0: preset value.
  TORCH_ARG(int64_t, mlp_dim) = 0;
  /// ViT patch size; 0: preset value (16).
  TORCH_ARG(int64_t, patch_size) = 0;
  /// Transformers (vit*, bert*): every encoder block as two pipeline layers,
  /// its attention and its MLP sub-layer (`encoder<i>_attention`,
  /// `encoder<i>_mlp`), the units EdgePipe partitions. Same parameters and
  /// function as the whole blocks.
  TORCH_ARG(bool, sub_layers) = false;
  /// The layers to construct: the others are recorded by name and shape
  /// only (a stage-only model, as a pipeline replica needs), so their
  /// parameters are never allocated or initialised. Not a JSON option: a
  /// process sets it for the stage it hosts. Default: every layer.
  TORCH_ARG(layer_range, build_layers) = layer_range{};
};

} // namespace asteroid::models
