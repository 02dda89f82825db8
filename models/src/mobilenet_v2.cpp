#include "asteroid/models/mobilenet_v2.hpp"

#include "common.hpp"

#include <array>
#include <cmath>

namespace asteroid::models {

namespace nn = torch::nn;
using detail::activation;
using detail::conv_bn_act;

inverted_residual_impl::inverted_residual_impl(int64_t in, int64_t out,
                                               int64_t stride,
                                               int64_t expand_ratio)
  : use_residual_(stride == 1 && in == out) {
  auto hidden = static_cast<int64_t>(std::round(in * static_cast<double>(expand_ratio)));
  chain seq;
  if (expand_ratio != 1)
    seq->push_back(conv_bn_act(in, hidden, 1, 1, 1, activation::relu6));
  seq->push_back(conv_bn_act(hidden, hidden, 3, stride, hidden, activation::relu6));
  seq->push_back(nn::Conv2d(nn::Conv2dOptions(hidden, out, 1).bias(false)));
  seq->push_back(nn::BatchNorm2d(out));
  conv_ = register_module("conv", seq);
}

torch::Tensor inverted_residual_impl::forward(torch::Tensor x) {
  if (use_residual_)
    return x + conv_->forward(x);
  return conv_->forward(x);
}

sequential_model make_mobilenet_v2(const model_options& o) {
  const std::string name = "mobilenet_v2";
  detail::check_classes(name, o);
  detail::check_width(name, o);
  int64_t channels = detail::or_default(name, "in_channels", o.in_channels(), 3);
  int64_t size = detail::or_default(name, "image_size", o.image_size(), 32);
  double dropout = detail::dropout_or(name, o, 0.2);
  bool cifar = detail::use_cifar_stem(o, size);
  double w = o.width_mult();

  struct stage { int64_t t, c, n, s; };
  // Table 2 of Sandler et al. 2018 (torchvision's inverted_residual_setting).
  std::array<stage, 7> setting{{{1, 16, 1, 1},
                                {6, 24, 2, cifar ? 1 : 2},
                                {6, 32, 3, 2},
                                {6, 64, 4, 2},
                                {6, 96, 3, 1},
                                {6, 160, 3, 2},
                                {6, 320, 1, 1}}};

  sequential_model model(shape_t{channels, size, size}, torch::kFloat,
                         o.build_layers());
  int64_t in = detail::make_divisible(32 * w);
  int64_t last = detail::make_divisible(1280 * std::max(1.0, w));
  int64_t stem_stride = cifar ? 1 : 2;
  int64_t hw = detail::conv_out(size, 3, stem_stride, 1);
  model->push_back("stem",
                   [&] {
                     return nn::AnyModule(conv_bn_act(channels, in, 3, stem_stride,
                                                      1, activation::relu6));
                   },
                   {in, hw, hw});
  int block = 1;
  for (const auto& st : setting) {
    int64_t out = detail::make_divisible(st.c * w);
    for (int64_t i = 0; i < st.n; ++i) {
      int64_t stride = i == 0 ? st.s : 1;
      hw = detail::conv_out(hw, 3, stride, 1);
      model->push_back("block" + std::to_string(block++),
                       [&] {
                         return nn::AnyModule(inverted_residual(in, out, stride, st.t));
                       },
                       {out, hw, hw});
      in = out;
    }
  }
  model->push_back("last_conv",
                   [&] {
                     return nn::AnyModule(
                       conv_bn_act(in, last, 1, 1, 1, activation::relu6));
                   },
                   {last, hw, hw});
  model->push_back("head",
                   [&] {
                     return nn::AnyModule(
                       detail::pooled_classifier(last, o.num_classes(), dropout));
                   },
                   {o.num_classes()});
  detail::init_conv_bn(*model);
  // torchvision initialises the classifier with N(0, 0.01) and zero bias.
  torch::NoGradGuard no_grad;
  const int head = static_cast<int>(model->size()) - 1;
  for (auto& m : model->is_built(head) ? model->layer_module(head)->modules()
                                       : std::vector<std::shared_ptr<nn::Module>>{}) {
    if (auto* fc = m->as<nn::Linear>()) {
      fc->weight.normal_(0, 0.01);
      fc->bias.zero_();
    }
  }
  return model;
}

} // namespace asteroid::models
