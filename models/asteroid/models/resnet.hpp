#pragma once

#include "asteroid/models/chain.hpp"
#include "asteroid/models/model_options.hpp"
#include "asteroid/models/sequential_model.hpp"

#include <torch/torch.h>

namespace asteroid::models {

/// ResNet basic block (two 3x3 convs + identity/projection shortcut), as
/// torchvision's `BasicBlock`. One pipeline layer.
class basic_block_impl : public torch::nn::Module {
public:
  static constexpr int64_t expansion = 1;
  basic_block_impl(int64_t in_planes, int64_t planes, int64_t stride);
  torch::Tensor forward(torch::Tensor x);

private:
  torch::nn::Conv2d conv1_{nullptr}, conv2_{nullptr};
  torch::nn::BatchNorm2d bn1_{nullptr}, bn2_{nullptr};
  chain downsample_{nullptr};
};
TORCH_MODULE_IMPL(basic_block, basic_block_impl);

/// ResNet bottleneck block (1x1, 3x3 with the stride, 1x1 x4), as
/// torchvision's `Bottleneck` (ResNet v1.5). One pipeline layer.
class bottleneck_impl : public torch::nn::Module {
public:
  static constexpr int64_t expansion = 4;
  bottleneck_impl(int64_t in_planes, int64_t planes, int64_t stride);
  torch::Tensor forward(torch::Tensor x);

private:
  torch::nn::Conv2d conv1_{nullptr}, conv2_{nullptr}, conv3_{nullptr};
  torch::nn::BatchNorm2d bn1_{nullptr}, bn2_{nullptr}, bn3_{nullptr};
  chain downsample_{nullptr};
};
TORCH_MODULE_IMPL(bottleneck, bottleneck_impl);

/// ResNet-18 in torchvision's layout: layers `stem`, `layer1_0` ...
/// `layer4_1` (one per block), `head` (avgpool + fc). Default input 3x32x32
/// with the CIFAR stem (3x3/1 conv, no max pool); `stem(imagenet)` or
/// image_size > 64 gives the 7x7/2 conv + max pool stem. `width_mult` scales
/// the stage widths (64, 128, 256, 512).
sequential_model make_resnet18(const model_options& options);

/// ResNet-50, like `make_resnet18` with bottleneck blocks {3, 4, 6, 3}.
sequential_model make_resnet50(const model_options& options);

} // namespace asteroid::models
