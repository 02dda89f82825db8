#pragma once

#include "asteroid/models/attention.hpp"
#include "asteroid/models/model_options.hpp"
#include "asteroid/models/sequential_model.hpp"

#include <torch/torch.h>

namespace asteroid::models {

/// ViT input stage: non-overlapping patch projection (strided conv), class
/// token, learned position embedding, dropout. `[batch, C, H, W]` to
/// `[batch, 1 + (H / patch)^2, hidden]`.
class vit_patch_embedding_impl : public torch::nn::Module {
public:
  vit_patch_embedding_impl(int64_t in_channels, int64_t image_size,
                           int64_t patch_size, int64_t hidden, double dropout);
  torch::Tensor forward(torch::Tensor x);

private:
  torch::nn::Conv2d proj_{nullptr};
  torch::Tensor class_token_, position_;
  torch::nn::Dropout dropout_{nullptr};
};
TORCH_MODULE_IMPL(vit_patch_embedding, vit_patch_embedding_impl);

/// A pre-LayerNorm ViT encoder block (torchvision's `EncoderBlock`), or one
/// of its residual sub-layers: `x + attention(norm1(x))` and
/// `x + mlp(norm2(x))`. One pipeline layer.
class vit_block_impl : public torch::nn::Module {
public:
  vit_block_impl(int64_t hidden, int64_t heads, int64_t mlp_dim, double dropout,
                 block_part part = block_part::whole);
  torch::Tensor forward(torch::Tensor x);

private:
  block_part part_;
  torch::nn::LayerNorm norm1_{nullptr}, norm2_{nullptr};
  self_attention attention_{nullptr};
  torch::nn::Linear fc1_{nullptr}, fc2_{nullptr};
  torch::nn::Dropout dropout_{nullptr};
};
TORCH_MODULE_IMPL(vit_block, vit_block_impl);

/// Final LayerNorm, class-token readout and linear classifier.
class vit_head_impl : public torch::nn::Module {
public:
  vit_head_impl(int64_t hidden, int64_t classes);
  torch::Tensor forward(torch::Tensor x);

private:
  torch::nn::LayerNorm norm_{nullptr};
  torch::nn::Linear fc_{nullptr};
};
TORCH_MODULE_IMPL(vit_head, vit_head_impl);

/// Vision Transformer in torchvision's layout: layers `patch_embedding`,
/// `encoder0` ..., `head`. Preset ViT-B/16 (Dosovitskiy et al. 2021): patch
/// 16, hidden 768, 12 layers, 12 heads, MLP 3072, input 3x224x224. Every
/// size can be overridden by the options (e.g. a tiny config for tests);
/// image_size must be a multiple of the patch size.
sequential_model make_vit(const model_options& options);

/// ViT-Ti/16 preset (hidden 192, 12 layers, 3 heads, MLP 768; as DeiT-Ti).
sequential_model make_vit_tiny(const model_options& options);

/// ViT-L/16 preset (hidden 1024, 24 layers, 16 heads, MLP 4096; 304,326,632
/// parameters with 1000 classes, as torchvision's vit_l_16).
sequential_model make_vit_large(const model_options& options);

} // namespace asteroid::models
