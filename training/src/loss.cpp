#include "asteroid/training/loss.hpp"

#include <map>
#include <mutex>
#include <stdexcept>

namespace asteroid::training {

namespace {

torch::Tensor summed_cross_entropy(const torch::Tensor& output,
                                   const torch::Tensor& target) {
  return torch::nn::functional::cross_entropy(
    output, target,
    torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum));
}

struct loss_registry {
  std::mutex mutex;
  std::map<std::string, loss_function> losses{
    {default_loss, &summed_cross_entropy}};
};

loss_registry& the_loss_registry() {
  static loss_registry r;
  return r;
}

} // namespace

loss_function find_loss(const std::string& name) {
  auto& r = the_loss_registry();
  std::lock_guard<std::mutex> guard{r.mutex};
  auto i = r.losses.find(name);
  if (i != r.losses.end())
    return i->second;
  std::string known;
  for (auto& [n, f] : r.losses)
    known += (known.empty() ? "" : ", ") + n;
  throw std::invalid_argument("unknown loss '" + name + "' (known: " + known
                              + "; a program registers its own with "
                                "training::register_loss)");
}

void register_loss(const std::string& name, loss_function loss) {
  if (name.empty() || !loss)
    throw std::invalid_argument("register_loss: a loss needs a name and a function");
  auto& r = the_loss_registry();
  std::lock_guard<std::mutex> guard{r.mutex};
  r.losses[name] = std::move(loss);
}

std::vector<std::string> loss_names() {
  auto& r = the_loss_registry();
  std::lock_guard<std::mutex> guard{r.mutex};
  std::vector<std::string> names;
  for (auto& [n, f] : r.losses)
    names.push_back(n);
  return names;
}

} // namespace asteroid::training
