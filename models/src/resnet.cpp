#include "asteroid/models/resnet.hpp"

#include "common.hpp"

#include <array>
#include <cmath>

namespace asteroid::models {

namespace nn = torch::nn;

namespace {

nn::Conv2d conv(int64_t in, int64_t out, int64_t kernel, int64_t stride) {
  return nn::Conv2d(nn::Conv2dOptions(in, out, kernel)
                      .stride(stride)
                      .padding((kernel - 1) / 2)
                      .bias(false));
}

/// The projection shortcut, or an empty holder when identity suffices.
chain shortcut(int64_t in, int64_t out, int64_t stride) {
  if (stride == 1 && in == out)
    return nullptr;
  return chain(conv(in, out, 1, stride), nn::BatchNorm2d(out));
}

} // namespace

basic_block_impl::basic_block_impl(int64_t in_planes, int64_t planes,
                                   int64_t stride) {
  conv1_ = register_module("conv1", conv(in_planes, planes, 3, stride));
  bn1_ = register_module("bn1", nn::BatchNorm2d(planes));
  conv2_ = register_module("conv2", conv(planes, planes, 3, 1));
  bn2_ = register_module("bn2", nn::BatchNorm2d(planes));
  if (auto ds = shortcut(in_planes, planes * expansion, stride))
    downsample_ = register_module("downsample", ds);
}

torch::Tensor basic_block_impl::forward(torch::Tensor x) {
  auto out = torch::relu(bn1_(conv1_(x)));
  out = bn2_(conv2_(out));
  auto identity = downsample_ ? downsample_->forward(x) : x;
  return torch::relu(out + identity);
}

bottleneck_impl::bottleneck_impl(int64_t in_planes, int64_t planes,
                                 int64_t stride) {
  conv1_ = register_module("conv1", conv(in_planes, planes, 1, 1));
  bn1_ = register_module("bn1", nn::BatchNorm2d(planes));
  conv2_ = register_module("conv2", conv(planes, planes, 3, stride));
  bn2_ = register_module("bn2", nn::BatchNorm2d(planes));
  conv3_ = register_module("conv3", conv(planes, planes * expansion, 1, 1));
  bn3_ = register_module("bn3", nn::BatchNorm2d(planes * expansion));
  if (auto ds = shortcut(in_planes, planes * expansion, stride))
    downsample_ = register_module("downsample", ds);
}

torch::Tensor bottleneck_impl::forward(torch::Tensor x) {
  auto out = torch::relu(bn1_(conv1_(x)));
  out = torch::relu(bn2_(conv2_(out)));
  out = bn3_(conv3_(out));
  auto identity = downsample_ ? downsample_->forward(x) : x;
  return torch::relu(out + identity);
}

namespace {

template <class Block>
sequential_model make_resnet(const std::string& name,
                             std::array<int, 4> blocks,
                             const model_options& o) {
  detail::check_classes(name, o);
  detail::check_width(name, o);
  int64_t channels = detail::or_default(name, "in_channels", o.in_channels(), 3);
  int64_t size = detail::or_default(name, "image_size", o.image_size(), 32);
  sequential_model model(shape_t{channels, size, size}, torch::kFloat,
                         o.build_layers());
  auto width = [&](int64_t c) {
    return std::max<int64_t>(1, std::lround(c * o.width_mult()));
  };
  int64_t in = width(64);
  int64_t hw = size;
  if (detail::use_cifar_stem(o, size)) {
    model->push_back("stem",
                     [&] {
                       return nn::AnyModule(chain(conv(channels, in, 3, 1),
                                                  nn::BatchNorm2d(in), nn::ReLU()));
                     },
                     {in, hw, hw});
  } else {
    hw = detail::conv_out(hw, 7, 2, 3);
    hw = detail::conv_out(hw, 3, 2, 1);
    model->push_back(
      "stem",
      [&] {
        return nn::AnyModule(chain(
          conv(channels, in, 7, 2), nn::BatchNorm2d(in), nn::ReLU(),
          nn::MaxPool2d(nn::MaxPool2dOptions(3).stride(2).padding(1))));
      },
      {in, hw, hw});
  }
  for (int stage = 0; stage < 4; ++stage) {
    int64_t planes = width(int64_t{64} << stage);
    for (int b = 0; b < blocks[static_cast<size_t>(stage)]; ++b) {
      int64_t stride = (stage > 0 && b == 0) ? 2 : 1;
      hw = detail::conv_out(hw, 3, stride, 1);
      model->push_back("layer" + std::to_string(stage + 1) + "_"
                         + std::to_string(b),
                       [&] { return nn::AnyModule(Block(in, planes, stride)); },
                       {planes * Block::Impl::expansion, hw, hw});
      in = planes * Block::Impl::expansion;
    }
  }
  model->push_back("head",
                   [&] {
                     return nn::AnyModule(
                       detail::pooled_classifier(in, o.num_classes(), 0.0));
                   },
                   {o.num_classes()});
  detail::init_conv_bn(*model);
  return model;
}

} // namespace

sequential_model make_resnet18(const model_options& o) {
  return make_resnet<basic_block>("resnet18", {2, 2, 2, 2}, o);
}

sequential_model make_resnet50(const model_options& o) {
  return make_resnet<bottleneck>("resnet50", {3, 4, 6, 3}, o);
}

} // namespace asteroid::models
