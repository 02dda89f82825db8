#include "asteroid/models/mlp_cnn.hpp"

#include "common.hpp"

#include <cmath>

namespace asteroid::models {

namespace nn = torch::nn;

sequential_model make_mlp(const model_options& o) {
  const std::string name = "mlp";
  detail::check_classes(name, o);
  int64_t channels = detail::or_default(name, "in_channels", o.in_channels(), 1);
  int64_t size = detail::or_default(name, "image_size", o.image_size(), 28);
  if (o.hidden_sizes().empty())
    detail::bad_option(name, "hidden_sizes", "must not be empty");
  sequential_model model(shape_t{channels, size, size}, torch::kFloat,
                         o.build_layers());
  int64_t in = channels * size * size;
  for (size_t i = 0; i < o.hidden_sizes().size(); ++i) {
    int64_t h = detail::positive(name, "hidden_sizes", o.hidden_sizes()[i]);
    model->push_back("fc" + std::to_string(i + 1),
                     [&] {
                       chain seq;
                       if (i == 0)
                         seq->push_back(nn::Flatten());
                       seq->push_back(nn::Linear(in, h));
                       seq->push_back(nn::ReLU());
                       return nn::AnyModule(seq);
                     },
                     {h});
    in = h;
  }
  model->push_back("classifier",
                   [&] { return nn::AnyModule(nn::Linear(in, o.num_classes())); },
                   {o.num_classes()});
  return model;
}

namespace {

sequential_model make_small_cnn(const std::string& name, const model_options& o,
                                bool batch_norm) {
  detail::check_classes(name, o);
  detail::check_width(name, o);
  int64_t channels = detail::or_default(name, "in_channels", o.in_channels(), 1);
  int64_t size = detail::or_default(name, "image_size", o.image_size(), 28);
  if (size < 4)
    detail::bad_option(name, "image_size",
                       "must be >= 4 (two 2x2 poolings), got "
                         + std::to_string(size));
  auto scaled = [&](int64_t c) {
    return std::max<int64_t>(1, std::lround(c * o.width_mult()));
  };
  sequential_model model(shape_t{channels, size, size}, torch::kFloat,
                         o.build_layers());
  int64_t in = channels;
  int64_t hw = size;
  int index = 1;
  for (int64_t base : {32, 64}) {
    int64_t out = scaled(base);
    hw = hw / 2;
    model->push_back("conv" + std::to_string(index++),
                     [&] {
                       chain seq(nn::Conv2d(
                         nn::Conv2dOptions(in, out, 3).padding(1).bias(!batch_norm)));
                       if (batch_norm)
                         seq->push_back(nn::BatchNorm2d(out));
                       seq->push_back(nn::ReLU());
                       seq->push_back(nn::MaxPool2d(nn::MaxPool2dOptions(2)));
                       return nn::AnyModule(seq);
                     },
                     {out, hw, hw});
    in = out;
  }
  int64_t hidden = scaled(128);
  model->push_back("fc1",
                   [&] {
                     return nn::AnyModule(chain(nn::Flatten(),
                                                nn::Linear(in * hw * hw, hidden),
                                                nn::ReLU()));
                   },
                   {hidden});
  model->push_back("classifier",
                   [&] { return nn::AnyModule(nn::Linear(hidden, o.num_classes())); },
                   {o.num_classes()});
  return model;
}

} // namespace

sequential_model make_cnn(const model_options& o) {
  return make_small_cnn("cnn", o, false);
}

sequential_model make_cnn_bn(const model_options& o) {
  return make_small_cnn("cnn_bn", o, true);
}

} // namespace asteroid::models
