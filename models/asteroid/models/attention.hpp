#pragma once

#include <torch/torch.h>

namespace asteroid::models {

/// Which part of a transformer encoder block a module computes: the whole
/// block (one pipeline layer) or one of its two residual sub-layers (the
/// units EdgePipe partitions; model_options::sub_layers).
enum class block_part { whole, attention, mlp };

/// Multi-head self-attention over `[batch, tokens, dim]` without masking,
/// with separate query/key/value/output projections (the same parameter
/// count as PyTorch's packed `nn::MultiheadAttention`: 4 * (dim^2 + dim)).
class self_attention_impl : public torch::nn::Module {
public:
  /// Throws `std::invalid_argument` unless `heads` divides `dim`.
  self_attention_impl(int64_t dim, int64_t heads, double dropout);
  torch::Tensor forward(torch::Tensor x);

  torch::nn::Linear query{nullptr}, key{nullptr}, value{nullptr}, out{nullptr};

private:
  int64_t heads_;
  torch::nn::Dropout dropout_{nullptr};
};
TORCH_MODULE_IMPL(self_attention, self_attention_impl);

} // namespace asteroid::models
