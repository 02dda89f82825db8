#include "asteroid/models/efficientnet.hpp"

#include "common.hpp"

#include <array>
#include <cmath>

namespace asteroid::models {

namespace nn = torch::nn;
using detail::activation;
using detail::conv_bn_act;

squeeze_excitation_impl::squeeze_excitation_impl(int64_t channels,
                                                 int64_t squeeze_channels) {
  fc1_ = register_module("fc1", nn::Conv2d(nn::Conv2dOptions(channels, squeeze_channels, 1)));
  fc2_ = register_module("fc2", nn::Conv2d(nn::Conv2dOptions(squeeze_channels, channels, 1)));
}

torch::Tensor squeeze_excitation_impl::forward(torch::Tensor x) {
  auto scale = torch::adaptive_avg_pool2d(x, {1, 1});
  scale = torch::sigmoid(fc2_(torch::silu(fc1_(scale))));
  return x * scale;
}

mbconv_impl::mbconv_impl(int64_t in, int64_t out, int64_t kernel,
                         int64_t stride, int64_t expand_ratio,
                         double stochastic_depth)
  : use_residual_(stride == 1 && in == out),
    stochastic_depth_(stochastic_depth) {
  int64_t expanded = detail::make_divisible(static_cast<double>(in * expand_ratio));
  chain seq;
  if (expanded != in)
    seq->push_back(conv_bn_act(in, expanded, 1, 1, 1, activation::silu));
  seq->push_back(conv_bn_act(expanded, expanded, kernel, stride, expanded,
                             activation::silu));
  seq->push_back(squeeze_excitation(expanded, std::max<int64_t>(1, in / 4)));
  seq->push_back(conv_bn_act(expanded, out, 1, 1, 1, activation::none));
  block_ = register_module("block", seq);
}

torch::Tensor mbconv_impl::forward(torch::Tensor x) {
  auto y = block_->forward(x);
  if (!use_residual_)
    return y;
  if (is_training() && stochastic_depth_ > 0) {
    double survival = 1.0 - stochastic_depth_;
    std::vector<int64_t> noise_shape(static_cast<size_t>(y.dim()), 1);
    noise_shape[0] = y.size(0);
    auto noise = torch::empty(noise_shape, y.options()).bernoulli_(survival);
    if (survival > 0)
      noise.div_(survival);
    y = y * noise;
  }
  return y + x;
}

sequential_model make_efficientnet_b1(const model_options& o) {
  const std::string name = "efficientnet_b1";
  detail::check_classes(name, o);
  detail::check_width(name, o);
  int64_t channels = detail::or_default(name, "in_channels", o.in_channels(), 3);
  int64_t size = detail::or_default(name, "image_size", o.image_size(), 32);
  double dropout = detail::dropout_or(name, o, 0.2);
  double sd = o.stochastic_depth() < 0 ? 0.2 : o.stochastic_depth();
  if (sd >= 1.0)
    detail::bad_option(name, "stochastic_depth", "must be < 1");
  bool cifar = detail::use_cifar_stem(o, size);
  const double width = o.width_mult();  // B1: 1.0
  const double depth = 1.1;             // B1 depth coefficient

  struct stage { int64_t expand, kernel, stride, in, out, layers; };
  // EfficientNet-B0 baseline (Tan & Le 2019, Table 1; torchvision's
  // _efficientnet_conf), scaled by `width` and `depth` below.
  std::array<stage, 7> setting{{{1, 3, 1, 32, 16, 1},
                                {6, 3, 2, 16, 24, 2},
                                {6, 5, 2, 24, 40, 2},
                                {6, 3, 2, 40, 80, 3},
                                {6, 5, 1, 80, 112, 3},
                                {6, 5, 2, 112, 192, 4},
                                {6, 3, 1, 192, 320, 1}}};
  auto ch = [&](int64_t c) { return detail::make_divisible(c * width); };
  auto reps = [&](int64_t n) {
    return static_cast<int64_t>(std::ceil(static_cast<double>(n) * depth));
  };
  int64_t total_blocks = 0;
  for (const auto& st : setting)
    total_blocks += reps(st.layers);

  sequential_model model(shape_t{channels, size, size}, torch::kFloat,
                         o.build_layers());
  int64_t stem_out = ch(setting[0].in);
  int64_t stem_stride = cifar ? 1 : 2;
  int64_t hw = detail::conv_out(size, 3, stem_stride, 1);
  model->push_back("stem",
                   [&] {
                     return nn::AnyModule(conv_bn_act(channels, stem_out, 3,
                                                      stem_stride, 1, activation::silu));
                   },
                   {stem_out, hw, hw});
  int64_t block_id = 0;
  int64_t in = stem_out;
  for (size_t s = 0; s < setting.size(); ++s) {
    const auto& st = setting[s];
    int64_t out = ch(st.out);
    for (int64_t i = 0; i < reps(st.layers); ++i) {
      int64_t stride = i == 0 ? st.stride : 1;
      // Linearly increasing drop probability, as in torchvision.
      double p = sd * static_cast<double>(block_id) / static_cast<double>(total_blocks);
      hw = detail::conv_out(hw, st.kernel, stride, (st.kernel - 1) / 2);
      model->push_back("stage" + std::to_string(s + 1) + "_" + std::to_string(i),
                       [&] {
                         return nn::AnyModule(
                           mbconv(in, out, st.kernel, stride, st.expand, p));
                       },
                       {out, hw, hw});
      in = out;
      ++block_id;
    }
  }
  int64_t last = 4 * in;
  model->push_back("last_conv",
                   [&] {
                     return nn::AnyModule(
                       conv_bn_act(in, last, 1, 1, 1, activation::silu));
                   },
                   {last, hw, hw});
  model->push_back("head",
                   [&] {
                     return nn::AnyModule(
                       detail::pooled_classifier(last, o.num_classes(), dropout));
                   },
                   {o.num_classes()});
  detail::init_conv_bn(*model);
  // torchvision: classifier weights U(-1/sqrt(classes), 1/sqrt(classes)).
  torch::NoGradGuard no_grad;
  const int head = static_cast<int>(model->size()) - 1;
  for (auto& m : model->is_built(head) ? model->layer_module(head)->modules()
                                       : std::vector<std::shared_ptr<nn::Module>>{}) {
    if (auto* fc = m->as<nn::Linear>()) {
      double r = 1.0 / std::sqrt(static_cast<double>(o.num_classes()));
      fc->weight.uniform_(-r, r);
      fc->bias.zero_();
    }
  }
  return model;
}

} // namespace asteroid::models
