#pragma once

#include <torch/torch.h>

#include <utility>

namespace asteroid::models {

/// A `torch::nn::Sequential` with a non-template `forward(Tensor)`, so that
/// it can be stored in a `torch::nn::AnyModule` (a model layer, or an element
/// of another chain). Children are named "0", "1", ... as in Sequential.
class chain_impl : public torch::nn::SequentialImpl {
public:
  using torch::nn::SequentialImpl::SequentialImpl;

  torch::Tensor forward(torch::Tensor x) {
    return torch::nn::SequentialImpl::forward<torch::Tensor>(std::move(x));
  }
};

/// Holder for `chain_impl`.
TORCH_MODULE_IMPL(chain, chain_impl);

} // namespace asteroid::models
