#pragma once

#include "asteroid/models/attention.hpp"
#include "asteroid/models/model_options.hpp"
#include "asteroid/models/sequential_model.hpp"

#include <torch/torch.h>

namespace asteroid::models {

/// BERT embeddings: token + learned position + token-type (all type 0, as
/// for single-segment input) embeddings, LayerNorm, dropout. Maps int64 token
/// ids `[batch, seq]` to `[batch, seq, hidden]`.
class bert_embeddings_impl : public torch::nn::Module {
public:
  bert_embeddings_impl(int64_t vocab, int64_t max_positions, int64_t hidden,
                       double dropout);
  torch::Tensor forward(torch::Tensor ids);

private:
  torch::nn::Embedding word_{nullptr}, position_{nullptr}, token_type_{nullptr};
  torch::nn::LayerNorm norm_{nullptr};
  torch::nn::Dropout dropout_{nullptr};
};
TORCH_MODULE_IMPL(bert_embeddings, bert_embeddings_impl);

/// A post-LayerNorm BERT encoder layer (self-attention, add & norm, GELU
/// feed-forward, add & norm), or one of its two sub-layers:
/// `norm1(x + attention(x))` and `norm2(x + feed_forward(x))`. One pipeline
/// layer.
class bert_layer_impl : public torch::nn::Module {
public:
  bert_layer_impl(int64_t hidden, int64_t heads, int64_t intermediate,
                  double dropout, block_part part = block_part::whole);
  torch::Tensor forward(torch::Tensor x);

private:
  block_part part_;
  self_attention attention_{nullptr};
  torch::nn::LayerNorm norm1_{nullptr}, norm2_{nullptr};
  torch::nn::Linear fc1_{nullptr}, fc2_{nullptr};
  torch::nn::Dropout dropout_{nullptr};
};
TORCH_MODULE_IMPL(bert_layer, bert_layer_impl);

/// BERT pooler (first token, dense + tanh) followed by dropout and the
/// classification layer: `[batch, seq, hidden]` to `[batch, classes]`.
class bert_head_impl : public torch::nn::Module {
public:
  bert_head_impl(int64_t hidden, int64_t classes, double dropout);
  torch::Tensor forward(torch::Tensor x);

private:
  torch::nn::Linear pooler_{nullptr}, classifier_{nullptr};
  torch::nn::Dropout dropout_{nullptr};
};
TORCH_MODULE_IMPL(bert_head, bert_head_impl);

/// BERT for sequence classification: layers `embeddings`, `encoder0` ...,
/// `head`. Input: int64 token ids of shape `[seq_len]` per sample; the
/// position table has 512 entries (seq_len must not exceed it) and there is
/// no attention mask (sequences are not padded). Presets (Turc et al. 2019):
/// BERT-Small = 4 layers, hidden 512, 8 heads, intermediate 2048; hidden,
/// layer, head and intermediate sizes can be overridden by the options.
sequential_model make_bert_small(const model_options& options);

/// BERT-Tiny preset: 2 layers, hidden 128, 2 heads, intermediate 512.
sequential_model make_bert_tiny(const model_options& options);

/// BERT-Base preset (Devlin et al. 2019): 12 layers, hidden 768, 12 heads,
/// intermediate 3072; 109,482,240 parameters before the classifier.
sequential_model make_bert_base(const model_options& options);

} // namespace asteroid::models
