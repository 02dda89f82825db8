#pragma once

#include "asteroid/models/chain.hpp"
#include "asteroid/models/model_options.hpp"
#include "asteroid/models/sequential_model.hpp"

#include <torch/torch.h>

namespace asteroid::models {

/// MobileNetV2 inverted residual block (1x1 expand, 3x3 depthwise, 1x1
/// linear projection; residual when shapes allow), as torchvision's
/// `InvertedResidual`. One pipeline layer.
class inverted_residual_impl : public torch::nn::Module {
public:
  inverted_residual_impl(int64_t in, int64_t out, int64_t stride,
                         int64_t expand_ratio);
  torch::Tensor forward(torch::Tensor x);

private:
  bool use_residual_;
  chain conv_{nullptr};
};
TORCH_MODULE_IMPL(inverted_residual, inverted_residual_impl);

/// MobileNetV2 in torchvision's layout: layers `stem`, `block1` ... `block17`,
/// `last_conv`, `head` (avgpool + dropout + linear). Default input 3x32x32
/// with the CIFAR adjustments of common ports (stem stride 1 and the first
/// 24-channel stage at stride 1, as in kuangliu/pytorch-cifar), selected by
/// `stem` (automatic: image_size <= 64). Parameter counts do not depend on
/// the strides.
sequential_model make_mobilenet_v2(const model_options& options);

} // namespace asteroid::models
