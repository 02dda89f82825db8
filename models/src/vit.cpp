#include "asteroid/models/vit.hpp"

#include "common.hpp"

#include <cmath>

namespace asteroid::models {

namespace nn = torch::nn;

namespace {

nn::LayerNorm vit_layer_norm(int64_t hidden) {
  return nn::LayerNorm(nn::LayerNormOptions({hidden}).eps(1e-6));
}

} // namespace

vit_patch_embedding_impl::vit_patch_embedding_impl(int64_t in_channels,
                                                   int64_t image_size,
                                                   int64_t patch_size,
                                                   int64_t hidden,
                                                   double dropout) {
  proj_ = register_module(
    "proj", nn::Conv2d(nn::Conv2dOptions(in_channels, hidden, patch_size)
                         .stride(patch_size)));
  int64_t patches = (image_size / patch_size) * (image_size / patch_size);
  class_token_ = register_parameter("class_token", torch::zeros({1, 1, hidden}));
  position_ = register_parameter("position",
                                 torch::empty({1, patches + 1, hidden}).normal_(0, 0.02));
  dropout_ = register_module("dropout", nn::Dropout(dropout));
  // torchvision: truncated normal with std sqrt(1 / fan_in), zero bias; the
  // truncation here is at two standard deviations.
  torch::NoGradGuard no_grad;
  double std = std::sqrt(1.0 / static_cast<double>(in_channels * patch_size * patch_size));
  proj_->weight.normal_(0, std).clamp_(-2 * std, 2 * std);
  proj_->bias.zero_();
}

torch::Tensor vit_patch_embedding_impl::forward(torch::Tensor x) {
  auto tokens = proj_(x).flatten(2).transpose(1, 2);  // [B, patches, hidden]
  auto cls = class_token_.expand({x.size(0), -1, -1});
  return dropout_(torch::cat({cls, tokens}, 1) + position_);
}

vit_block_impl::vit_block_impl(int64_t hidden, int64_t heads, int64_t mlp_dim,
                               double dropout, block_part part)
    : part_(part) {
  const bool attention = part != block_part::mlp, mlp = part != block_part::attention;
  // Constructed and initialised in the whole block's order, so that a whole
  // block draws its weights as it always did.
  if (attention) {
    norm1_ = register_module("norm1", vit_layer_norm(hidden));
    // torchvision's encoder uses no dropout on the attention weights by default.
    attention_ = register_module("attention", self_attention(hidden, heads, 0.0));
  }
  if (mlp) {
    norm2_ = register_module("norm2", vit_layer_norm(hidden));
    fc1_ = register_module("fc1", nn::Linear(hidden, mlp_dim));
    fc2_ = register_module("fc2", nn::Linear(mlp_dim, hidden));
  }
  dropout_ = register_module("dropout", nn::Dropout(dropout));
  torch::NoGradGuard no_grad;
  if (mlp)
    for (auto* fc : {fc1_.get(), fc2_.get()}) {
      nn::init::xavier_uniform_(fc->weight);
      fc->bias.normal_(0, 1e-6);
    }
  if (attention) {
    for (auto* fc : {attention_->query.get(), attention_->key.get(),
                     attention_->value.get()}) {
      nn::init::xavier_uniform_(fc->weight);
      fc->bias.zero_();
    }
    attention_->out->bias.zero_();
  }
}

torch::Tensor vit_block_impl::forward(torch::Tensor x) {
  if (part_ != block_part::mlp)
    x = x + dropout_(attention_(norm1_(x)));
  if (part_ == block_part::attention)
    return x;
  auto y = dropout_(fc2_(dropout_(torch::gelu(fc1_(norm2_(x))))));
  return x + y;
}

vit_head_impl::vit_head_impl(int64_t hidden, int64_t classes) {
  norm_ = register_module("norm", vit_layer_norm(hidden));
  fc_ = register_module("fc", nn::Linear(hidden, classes));
}

torch::Tensor vit_head_impl::forward(torch::Tensor x) {
  return fc_(norm_(x).select(1, 0));
}

namespace {

struct vit_preset {
  int64_t patch, hidden, layers, heads, mlp_dim;
};

sequential_model build_vit(const std::string& name, vit_preset p,
                           const model_options& o) {
  detail::check_classes(name, o);
  int64_t channels = detail::or_default(name, "in_channels", o.in_channels(), 3);
  int64_t size = detail::or_default(name, "image_size", o.image_size(), 224);
  int64_t patch = detail::or_default(name, "patch_size", o.patch_size(), p.patch);
  int64_t hidden = detail::or_default(name, "hidden_dim", o.hidden_dim(), p.hidden);
  int64_t layers = detail::or_default(name, "num_layers", o.num_layers(), p.layers);
  int64_t heads = detail::or_default(name, "num_heads", o.num_heads(), p.heads);
  int64_t mlp_dim = detail::or_default(name, "mlp_dim", o.mlp_dim(), p.mlp_dim);
  double dropout = detail::dropout_or(name, o, 0.0);
  if (size % patch != 0)
    detail::bad_option(name, "image_size", std::to_string(size)
                                             + " is not a multiple of patch_size "
                                             + std::to_string(patch));
  if (hidden % heads != 0)
    detail::bad_option(name, "num_heads", std::to_string(heads)
                                            + " does not divide hidden_dim "
                                            + std::to_string(hidden));
  int64_t tokens = (size / patch) * (size / patch) + 1;

  sequential_model model(shape_t{channels, size, size}, torch::kFloat,
                         o.build_layers());
  model->push_back("patch_embedding",
                   [&] {
                     return nn::AnyModule(
                       vit_patch_embedding(channels, size, patch, hidden, dropout));
                   },
                   {tokens, hidden});
  detail::push_encoder_blocks(model, layers, o.sub_layers(), {tokens, hidden},
                              [&](block_part part) {
                                return nn::AnyModule(
                                  vit_block(hidden, heads, mlp_dim, dropout, part));
                              });
  // torchvision zero-initialises this classifier (for fine-tuning); the
  // default init is kept so that a freshly built model's logits carry signal.
  model->push_back("head",
                   [&] { return nn::AnyModule(vit_head(hidden, o.num_classes())); },
                   {o.num_classes()});
  return model;
}

} // namespace

sequential_model make_vit(const model_options& o) {
  return build_vit("vit", {16, 768, 12, 12, 3072}, o);
}

sequential_model make_vit_tiny(const model_options& o) {
  return build_vit("vit_tiny", {16, 192, 12, 3, 768}, o);
}

sequential_model make_vit_large(const model_options& o) {
  return build_vit("vit_large", {16, 1024, 24, 16, 4096}, o);
}

} // namespace asteroid::models
