#pragma once

#include "asteroid/models/chain.hpp"
#include "asteroid/models/model_options.hpp"
#include "asteroid/models/sequential_model.hpp"

#include <torch/torch.h>

namespace asteroid::models {

/// Squeeze-and-excitation: global pool, 1x1 reduce + SiLU, 1x1 expand +
/// sigmoid, channel scaling (torchvision's `SqueezeExcitation`).
class squeeze_excitation_impl : public torch::nn::Module {
public:
  squeeze_excitation_impl(int64_t channels, int64_t squeeze_channels);
  torch::Tensor forward(torch::Tensor x);

private:
  torch::nn::Conv2d fc1_{nullptr}, fc2_{nullptr};
};
TORCH_MODULE_IMPL(squeeze_excitation, squeeze_excitation_impl);

/// EfficientNet MBConv block: optional 1x1 expansion, kxk depthwise, SE,
/// 1x1 projection, residual with stochastic depth (per-sample, "row" mode as
/// in torchvision) when shapes allow. One pipeline layer.
class mbconv_impl : public torch::nn::Module {
public:
  mbconv_impl(int64_t in, int64_t out, int64_t kernel, int64_t stride,
              int64_t expand_ratio, double stochastic_depth);
  torch::Tensor forward(torch::Tensor x);

private:
  bool use_residual_;
  double stochastic_depth_;
  chain block_{nullptr};
};
TORCH_MODULE_IMPL(mbconv, mbconv_impl);

/// EfficientNet-B1 (width 1.0, depth 1.1) in torchvision's layout: layers
/// `stem`, `stage1_0` ... `stage7_1` (23 MBConv blocks), `last_conv`, `head`
/// (avgpool + dropout 0.2 + linear). SiLU activations. Default input 3x32x32
/// with a stride-1 stem (CIFAR); image_size > 64 or `stem(imagenet)` gives
/// the stride-2 stem. `width_mult` multiplies B1's channel widths.
sequential_model make_efficientnet_b1(const model_options& options);

} // namespace asteroid::models
