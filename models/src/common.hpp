#pragma once

// Helpers shared by the model builders; not part of the public API.

#include "asteroid/models/attention.hpp"
#include "asteroid/models/chain.hpp"
#include "asteroid/models/model_options.hpp"
#include "asteroid/models/sequential_model.hpp"

#include <torch/torch.h>

#include <cmath>
#include <stdexcept>
#include <string>

namespace asteroid::models::detail {

/// Output size of a convolution or pooling along one spatial dimension.
inline int64_t conv_out(int64_t in, int64_t kernel, int64_t stride,
                        int64_t padding, int64_t dilation = 1) {
  return (in + 2 * padding - dilation * (kernel - 1) - 1) / stride + 1;
}

/// torchvision's `_make_divisible`: rounds channels to a multiple of `divisor`
/// without going more than 10% below `v`.
inline int64_t make_divisible(double v, int64_t divisor = 8) {
  int64_t rounded = static_cast<int64_t>(v + divisor / 2.0) / divisor * divisor;
  int64_t result = std::max(divisor, rounded);
  if (static_cast<double>(result) < 0.9 * v)
    result += divisor;
  return result;
}

enum class activation { none, relu, relu6, silu };

/// Conv (no bias, "same" padding) + BatchNorm + activation, as torchvision's
/// `Conv2dNormActivation`.
inline chain conv_bn_act(int64_t in, int64_t out,
                                         int64_t kernel, int64_t stride,
                                         int64_t groups, activation act) {
  namespace nn = torch::nn;
  chain seq(
    nn::Conv2d(nn::Conv2dOptions(in, out, kernel)
                 .stride(stride)
                 .padding((kernel - 1) / 2)
                 .groups(groups)
                 .bias(false)),
    nn::BatchNorm2d(out));
  switch (act) {
    case activation::relu: seq->push_back(nn::ReLU()); break;
    case activation::relu6: seq->push_back(nn::ReLU6()); break;
    case activation::silu: seq->push_back(nn::SiLU()); break;
    case activation::none: break;
  }
  return seq;
}

/// Throws `std::invalid_argument("make_model(<model>): <field> ...")`.
[[noreturn]] inline void bad_option(const std::string& model,
                                    const std::string& field,
                                    const std::string& problem) {
  throw std::invalid_argument("make_model(" + model + "): option " + field
                              + " " + problem);
}

inline int64_t positive(const std::string& model, const char* field,
                        int64_t value) {
  if (value <= 0)
    bad_option(model, field, "must be positive, got " + std::to_string(value));
  return value;
}

/// `value` if non-zero, `fallback` otherwise; negative values are an error.
inline int64_t or_default(const std::string& model, const char* field,
                          int64_t value, int64_t fallback) {
  if (value < 0)
    bad_option(model, field, "must be >= 0, got " + std::to_string(value));
  return value == 0 ? fallback : value;
}

/// Resolved dropout probability (the reference value when negative).
inline double dropout_or(const std::string& model, const model_options& o,
                         double fallback) {
  double p = o.dropout() < 0 ? fallback : o.dropout();
  if (p >= 1.0)
    bad_option(model, "dropout", "must be < 1, got " + std::to_string(p));
  return p;
}

inline void check_width(const std::string& model, const model_options& o) {
  if (!(o.width_mult() > 0))
    bad_option(model, "width_mult",
               "must be positive, got " + std::to_string(o.width_mult()));
}

inline void check_classes(const std::string& model, const model_options& o) {
  positive(model, "num_classes", o.num_classes());
}

/// True when the CIFAR stem applies.
inline bool use_cifar_stem(const model_options& o, int64_t image_size) {
  switch (o.stem()) {
    case stem_kind::cifar: return true;
    case stem_kind::imagenet: return false;
    case stem_kind::automatic: break;
  }
  return image_size <= 64;
}

/// torchvision's CNN initialisation: Kaiming-normal (fan_out) convolutions
/// with zero bias, unit/zero BatchNorm. Linear layers are left alone.
inline void init_conv_bn(torch::nn::Module& root) {
  torch::NoGradGuard no_grad;
  for (auto& m : root.modules(/*include_self=*/true)) {
    if (auto* conv = m->as<torch::nn::Conv2d>()) {
      torch::nn::init::kaiming_normal_(conv->weight, 0.0, torch::kFanOut,
                                       torch::kReLU);
      if (conv->bias.defined())
        conv->bias.zero_();
    } else if (auto* bn = m->as<torch::nn::BatchNorm2d>()) {
      bn->weight.fill_(1.0);
      bn->bias.zero_();
    }
  }
}

/// Global average pool + flatten + dropout + linear: the classifier head of
/// the torchvision CNNs.
inline chain pooled_classifier(int64_t in_features,
                                               int64_t classes,
                                               double dropout) {
  namespace nn = torch::nn;
  chain seq(nn::AdaptiveAvgPool2d(nn::AdaptiveAvgPool2dOptions(1)),
                     nn::Flatten(),
                     // Kept at p = 0 too, so state names do not depend on it.
                     nn::Dropout(dropout),
                     nn::Linear(in_features, classes));
  return seq;
}

/// Appends `layers` transformer encoder blocks of output shape `shape`:
/// one layer "encoder<i>" each, or with sub-layers two, "encoder<i>_attention"
/// and "encoder<i>_mlp" (EdgePipe's partition units). `make(part)` returns
/// the module of one block or of its part; it runs only for layers the model
/// builds.
template <class MakeBlock>
void push_encoder_blocks(sequential_model& model, int64_t layers, bool sub_layers,
                         const shape_t& shape, MakeBlock make) {
  for (int64_t i = 0; i < layers; ++i) {
    auto name = "encoder" + std::to_string(i);
    if (!sub_layers) {
      model->push_back(name, [&] { return make(block_part::whole); }, shape);
      continue;
    }
    for (auto [suffix, part] : {std::pair{"_attention", block_part::attention},
                                std::pair{"_mlp", block_part::mlp}})
      model->push_back(name + suffix, [&, part = part] { return make(part); }, shape);
  }
}

} // namespace asteroid::models::detail
