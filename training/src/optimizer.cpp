#include "asteroid/training/optimizer.hpp"

#include <stdexcept>

namespace asteroid::training {

optimizer_kind parse_optimizer(const std::string& name) {
  if (name == "sgd")
    return optimizer_kind::sgd;
  if (name == "adam")
    return optimizer_kind::adam;
  throw std::invalid_argument("unknown optimizer '" + name
                              + "' (known: sgd, adam)");
}

const char* to_string(optimizer_kind kind) {
  return kind == optimizer_kind::sgd ? "sgd" : "adam";
}

std::unique_ptr<torch::optim::Optimizer>
make_optimizer(const optimizer_options& options,
               std::vector<torch::Tensor> params) {
  if (!(options.lr > 0.0))
    throw std::invalid_argument("learning rate must be positive, got "
                                + std::to_string(options.lr));
  switch (options.kind) {
    case optimizer_kind::sgd:
      return std::make_unique<torch::optim::SGD>(
        std::move(params), torch::optim::SGDOptions(options.lr)
                             .momentum(options.momentum)
                             .weight_decay(options.weight_decay));
    case optimizer_kind::adam:
      return std::make_unique<torch::optim::Adam>(
        std::move(params), torch::optim::AdamOptions(options.lr)
                             .weight_decay(options.weight_decay));
  }
  throw std::logic_error("unhandled optimizer kind");
}

} // namespace asteroid::training
