#include "asteroid/training/evaluate.hpp"

#include <algorithm>

namespace asteroid::training {

eval_result evaluate(models::sequential_model& model, const data::dataset& set,
                     int64_t batch_size, int64_t limit) {
  eval_result result;
  auto n = limit > 0 ? std::min(limit, set.size()) : set.size();
  if (n == 0)
    return result;
  bool was_training = model->is_training();
  model->eval();
  torch::NoGradGuard no_grad;
  double loss_sum = 0.0;
  int64_t correct = 0;
  for (int64_t begin = 0; begin < n; begin += batch_size) {
    auto b = set.get_range(begin, std::min(n, begin + batch_size));
    auto logits = model->forward(b.inputs);
    loss_sum += torch::nn::functional::cross_entropy(
                  logits, b.targets,
                  torch::nn::functional::CrossEntropyFuncOptions().reduction(
                    torch::kSum))
                  .item<double>();
    correct += logits.argmax(1).eq(b.targets).sum().item<int64_t>();
  }
  model->train(was_training);
  result.samples = n;
  result.loss = loss_sum / static_cast<double>(n);
  result.accuracy = static_cast<double>(correct) / static_cast<double>(n);
  return result;
}

} // namespace asteroid::training
