#include "asteroid/actors/stage_state.hpp"

#include "asteroid/serialization/optimizer_state.hpp"

#include <map>
#include <set>
#include <stdexcept>

namespace asteroid::actors {

using serialization::named_tensors;

namespace {

/// "<layer>.<param>" of every parameter of layers [first, end), in the order
/// of range_parameters (the optimizer's positions).
std::vector<std::string> parameter_names(const models::sequential_model& model,
                                         int first, int end) {
  std::vector<std::string> out;
  for (int i = first; i < end; ++i)
    for (const auto& p : model->layer_module(i)->named_parameters())
      out.push_back(model->layer_name(i) + "." + p.key());
  return out;
}

std::string layer_of(const std::string& tensor_name) {
  return tensor_name.substr(0, tensor_name.find('.'));
}

std::set<std::string> layer_names(const models::sequential_model& model,
                                   int first, int end) {
  std::set<std::string> out;
  for (int i = first; i < end; ++i)
    out.insert(model->layer_name(i));
  return out;
}

} // namespace

named_tensors capture_stage_state(const models::sequential_model& model,
                                  int first, int end,
                                  const torch::optim::Optimizer* opt,
                                  serialization::tensor_capture how) {
  named_tensors out;
  for (auto& [name, t] : model->range_state(first, end))
    out.emplace_back("w/" + name, serialization::host_tensor(t, how));
  if (!opt)
    return out;
  auto names = parameter_names(model, first, end);
  auto state = serialization::capture_optimizer_state(*opt, how);
  for (auto& [name, t] : state.tensors) {
    // "param.<i>.<field>" -> "o/<layer>.<param>/<field>"
    auto dot = name.find('.', 6);
    auto index = std::stoul(name.substr(6, dot - 6));
    if (index >= names.size())
      throw std::logic_error("stage state: optimizer has more parameters "
                             "than layers [" + std::to_string(first) + ", "
                             + std::to_string(end) + ")");
    out.emplace_back("o/" + names[index] + "/" + name.substr(dot + 1), t);
  }
  for (auto& [name, value] : state.hyper_params)
    if (name.size() < 7 || name.compare(name.size() - 7, 7, ".params") != 0)
      out.emplace_back("h/" + name,
                       torch::tensor(value, torch::dtype(torch::kFloat64)));
  return out;
}

named_tensors select_stage_state(const models::sequential_model& model,
                                 int first, int end, const named_tensors& state) {
  auto layers = layer_names(model, first, end);
  named_tensors out;
  for (auto& [name, t] : state) {
    if (name.rfind("h/", 0) == 0) {
      out.emplace_back(name, t);
      continue;
    }
    if (name.size() < 3 || name[1] != '/')
      throw std::invalid_argument("stage state: unexpected entry '" + name + "'");
    if (layers.count(layer_of(name.substr(2))))
      out.emplace_back(name, t);
  }
  return out;
}

bool covers(const models::sequential_model& model, int first, int end,
            const named_tensors& state) {
  std::set<std::string> have;
  for (auto& [name, t] : state)
    have.insert(name);
  for (auto& [name, t] : model->range_state(first, end))
    if (!have.count("w/" + name))
      return false;
  return true;
}

void load_stage_state(models::sequential_model& model, int first, int end,
                      torch::optim::Optimizer* opt, const named_tensors& state) {
  auto mine = select_stage_state(model, first, end, state);
  named_tensors weights;
  serialization::optimizer_state os;
  bool has_optimizer = false;
  std::map<std::string, size_t> index;
  auto names = parameter_names(model, first, end);
  for (size_t i = 0; i < names.size(); ++i)
    index[names[i]] = i;
  for (auto& [name, t] : mine) {
    if (name.rfind("w/", 0) == 0) {
      weights.emplace_back(name.substr(2), t);
    } else if (name.rfind("o/", 0) == 0) {
      has_optimizer = true;
      auto slash = name.rfind('/');
      auto param = name.substr(2, slash - 2);
      auto i = index.find(param);
      if (i == index.end() || slash <= 2)
        throw std::invalid_argument("stage state: optimizer entry '" + name
                                    + "' names no parameter of layers ["
                                    + std::to_string(first) + ", "
                                    + std::to_string(end) + ")");
      os.tensors.emplace_back("param." + std::to_string(i->second) + "."
                                + name.substr(slash + 1),
                              t);
    } else if (name.rfind("h/", 0) == 0) {
      if (t.numel() != 1)
        throw std::invalid_argument("stage state: hyper-parameter '" + name
                                    + "' is not a scalar");
      os.hyper_params.emplace_back(name.substr(2),
                                   t.to(torch::kFloat64).item<double>());
    }
  }
  model->load_range_state(first, end, weights); // throws naming what's missing
  if (!opt || !has_optimizer)
    return;
  // Parameter counts are a property of the range, not of the snapshot.
  auto& groups = opt->param_groups();
  for (size_t g = 0; g < groups.size(); ++g)
    os.hyper_params.emplace_back("group." + std::to_string(g) + ".params",
                                 static_cast<double>(groups[g].params().size()));
  os.kind = dynamic_cast<torch::optim::SGD*>(opt) ? "sgd" : "adam";
  serialization::load_optimizer_state(*opt, os);
}

} // namespace asteroid::actors
