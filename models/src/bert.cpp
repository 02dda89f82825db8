#include "asteroid/models/bert.hpp"

#include "common.hpp"

namespace asteroid::models {

namespace nn = torch::nn;

namespace {

constexpr int64_t max_positions = 512;
constexpr double layer_norm_eps = 1e-12;

nn::LayerNorm bert_layer_norm(int64_t hidden) {
  return nn::LayerNorm(nn::LayerNormOptions({hidden}).eps(layer_norm_eps));
}

} // namespace

bert_embeddings_impl::bert_embeddings_impl(int64_t vocab, int64_t positions,
                                           int64_t hidden, double dropout) {
  word_ = register_module("word", nn::Embedding(vocab, hidden));
  position_ = register_module("position", nn::Embedding(positions, hidden));
  token_type_ = register_module("token_type", nn::Embedding(2, hidden));
  norm_ = register_module("norm", bert_layer_norm(hidden));
  dropout_ = register_module("dropout", nn::Dropout(dropout));
}

torch::Tensor bert_embeddings_impl::forward(torch::Tensor ids) {
  auto positions = torch::arange(ids.size(1), ids.options().dtype(torch::kLong));
  auto types = torch::zeros_like(positions);
  auto x = word_(ids) + position_(positions).unsqueeze(0)
           + token_type_(types).unsqueeze(0);
  return dropout_(norm_(x));
}

bert_layer_impl::bert_layer_impl(int64_t hidden, int64_t heads,
                                 int64_t intermediate, double dropout,
                                 block_part part)
    : part_(part) {
  if (part != block_part::mlp) {
    attention_ = register_module("attention", self_attention(hidden, heads, dropout));
    norm1_ = register_module("norm1", bert_layer_norm(hidden));
  }
  if (part != block_part::attention) {
    fc1_ = register_module("fc1", nn::Linear(hidden, intermediate));
    fc2_ = register_module("fc2", nn::Linear(intermediate, hidden));
    norm2_ = register_module("norm2", bert_layer_norm(hidden));
  }
  dropout_ = register_module("dropout", nn::Dropout(dropout));
}

torch::Tensor bert_layer_impl::forward(torch::Tensor x) {
  if (part_ != block_part::mlp)
    x = norm1_(x + dropout_(attention_(x)));
  if (part_ == block_part::attention)
    return x;
  auto y = fc2_(torch::gelu(fc1_(x)));
  return norm2_(x + dropout_(y));
}

bert_head_impl::bert_head_impl(int64_t hidden, int64_t classes, double dropout) {
  pooler_ = register_module("pooler", nn::Linear(hidden, hidden));
  dropout_ = register_module("dropout", nn::Dropout(dropout));
  classifier_ = register_module("classifier", nn::Linear(hidden, classes));
}

torch::Tensor bert_head_impl::forward(torch::Tensor x) {
  auto pooled = torch::tanh(pooler_(x.select(1, 0)));
  return classifier_(dropout_(pooled));
}

namespace {

struct bert_preset {
  int64_t layers, hidden, heads, intermediate;
};

sequential_model make_bert(const std::string& name, bert_preset p,
                           const model_options& o) {
  detail::check_classes(name, o);
  int64_t layers = detail::or_default(name, "num_layers", o.num_layers(), p.layers);
  int64_t hidden = detail::or_default(name, "hidden_dim", o.hidden_dim(), p.hidden);
  int64_t heads = detail::or_default(name, "num_heads", o.num_heads(), p.heads);
  int64_t inter = detail::or_default(name, "mlp_dim", o.mlp_dim(), p.intermediate);
  int64_t seq = detail::positive(name, "seq_len", o.seq_len());
  int64_t vocab = detail::positive(name, "vocab_size", o.vocab_size());
  double dropout = detail::dropout_or(name, o, 0.1);
  if (seq > max_positions)
    detail::bad_option(name, "seq_len", "must be <= " + std::to_string(max_positions)
                                          + ", got " + std::to_string(seq));
  if (hidden % heads != 0)
    detail::bad_option(name, "num_heads", std::to_string(heads)
                                            + " does not divide hidden_dim "
                                            + std::to_string(hidden));

  sequential_model model(shape_t{seq}, torch::kLong, o.build_layers());
  model->push_back("embeddings",
                   [&] {
                     return nn::AnyModule(
                       bert_embeddings(vocab, max_positions, hidden, dropout));
                   },
                   {seq, hidden});
  detail::push_encoder_blocks(model, layers, o.sub_layers(), {seq, hidden},
                              [&](block_part part) {
                                return nn::AnyModule(
                                  bert_layer(hidden, heads, inter, dropout, part));
                              });
  model->push_back("head",
                   [&] {
                     return nn::AnyModule(bert_head(hidden, o.num_classes(), dropout));
                   },
                   {o.num_classes()});

  // BERT's initialisation: N(0, 0.02) weights, zero biases, unit LayerNorm.
  torch::NoGradGuard no_grad;
  for (auto& m : model->modules(/*include_self=*/false)) {
    if (auto* fc = m->as<nn::Linear>()) {
      fc->weight.normal_(0, 0.02);
      fc->bias.zero_();
    } else if (auto* emb = m->as<nn::Embedding>()) {
      emb->weight.normal_(0, 0.02);
    } else if (auto* ln = m->as<nn::LayerNorm>()) {
      ln->weight.fill_(1.0);
      ln->bias.zero_();
    }
  }
  return model;
}

} // namespace

sequential_model make_bert_small(const model_options& o) {
  return make_bert("bert_small", {4, 512, 8, 2048}, o);
}

sequential_model make_bert_tiny(const model_options& o) {
  return make_bert("bert_tiny", {2, 128, 2, 512}, o);
}

sequential_model make_bert_base(const model_options& o) {
  return make_bert("bert_base", {12, 768, 12, 3072}, o);
}

} // namespace asteroid::models
