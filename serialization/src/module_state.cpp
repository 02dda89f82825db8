#include "asteroid/serialization/module_state.hpp"

#include <map>
#include <stdexcept>

namespace asteroid::serialization {

named_tensors capture_module_state(const torch::nn::Module& module) {
  named_tensors out;
  for (const auto& item : module.named_parameters(/*recurse=*/true))
    out.emplace_back(item.key(), item.value().detach().clone());
  for (const auto& item : module.named_buffers(/*recurse=*/true))
    out.emplace_back(item.key(), item.value().detach().clone());
  return out;
}

void load_module_state(torch::nn::Module& module, const named_tensors& state) {
  std::map<std::string, torch::Tensor> targets;
  for (const auto& item : module.named_parameters(true))
    targets.emplace(item.key(), item.value());
  for (const auto& item : module.named_buffers(true))
    targets.emplace(item.key(), item.value());

  std::map<std::string, const torch::Tensor*> saved;
  for (const auto& [name, t] : state) {
    if (!targets.count(name))
      throw std::invalid_argument("module state: unexpected tensor '" + name + "'");
    if (!saved.emplace(name, &t).second)
      throw std::invalid_argument("module state: duplicate tensor '" + name + "'");
    const auto& target = targets.at(name);
    if (!t.defined() || t.sizes() != target.sizes())
      throw std::invalid_argument("module state: '" + name + "' has shape "
                                  + (t.defined() ? c10::str(t.sizes()) : "<undefined>")
                                  + " but the module expects " + c10::str(target.sizes()));
    // Integers copied into weights would be truncated values taken silently.
    if (target.is_floating_point() && !t.is_floating_point())
      throw std::invalid_argument("module state: '" + name + "' holds "
                                  + c10::toString(t.scalar_type())
                                  + " values but the module expects "
                                  + c10::toString(target.scalar_type()));
  }
  for (const auto& [name, target] : targets)
    if (!saved.count(name))
      throw std::invalid_argument("module state: missing tensor '" + name + "'");

  // All checks passed: now mutate, so a bad state never half-loads.
  torch::NoGradGuard no_grad;
  for (auto& [name, target] : targets)
    target.copy_(*saved.at(name));
}

} // namespace asteroid::serialization
