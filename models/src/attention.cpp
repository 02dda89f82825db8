#include "asteroid/models/attention.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

namespace asteroid::models {

namespace nn = torch::nn;

self_attention_impl::self_attention_impl(int64_t dim, int64_t heads,
                                         double dropout)
  : heads_(heads) {
  if (heads <= 0 || dim <= 0 || dim % heads != 0)
    throw std::invalid_argument("self_attention: num_heads " + std::to_string(heads)
                                + " must be positive and divide hidden size "
                                + std::to_string(dim));
  query = register_module("query", nn::Linear(dim, dim));
  key = register_module("key", nn::Linear(dim, dim));
  value = register_module("value", nn::Linear(dim, dim));
  out = register_module("out", nn::Linear(dim, dim));
  dropout_ = register_module("dropout", nn::Dropout(dropout));
}

torch::Tensor self_attention_impl::forward(torch::Tensor x) {
  const auto batch = x.size(0);
  const auto tokens = x.size(1);
  const auto dim = x.size(2);
  const auto head_dim = dim / heads_;
  auto split = [&](const torch::Tensor& t) {
    return t.view({batch, tokens, heads_, head_dim}).transpose(1, 2);
  };
  auto q = split(query(x));
  auto k = split(key(x));
  auto v = split(value(x));
  auto scores = torch::matmul(q, k.transpose(-2, -1))
                / std::sqrt(static_cast<double>(head_dim));
  auto weights = dropout_(torch::softmax(scores, -1));
  auto context = torch::matmul(weights, v).transpose(1, 2).reshape({batch, tokens, dim});
  return out(context);
}

} // namespace asteroid::models
