#include "asteroid/serialization/optimizer_state.hpp"

#include "asteroid/serialization/tensor_wire.hpp"

#include <map>
#include <sstream>
#include <stdexcept>
#include <type_traits>
#include <utility>

namespace asteroid::serialization {

namespace {

using torch::optim::Adam;
using torch::optim::AdamOptions;
using torch::optim::AdamParamState;
using torch::optim::SGD;
using torch::optim::SGDOptions;
using torch::optim::SGDParamState;

// torch keys optimizer state by the address of the parameter's TensorImpl:
// printed as text up to LibTorch 1.x, the pointer itself from 2.0 on.
using state_map = std::decay_t<decltype(std::declval<const torch::optim::Optimizer&>().state())>;

// A template, so that only the branch of this LibTorch's key is compiled.
template <class Key>
Key key_of(const torch::Tensor& p) {
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream os; // what LibTorch 1.x's c10::guts::to_string does
    os << p.unsafeGetTensorImpl();
    return os.str();
  } else {
    return p.unsafeGetTensorImpl();
  }
}

state_map::key_type state_key(const torch::Tensor& p) {
  return key_of<state_map::key_type>(p);
}

std::string kind_of(const torch::optim::Optimizer& opt) {
  if (dynamic_cast<const SGD*>(&opt))
    return "sgd";
  if (dynamic_cast<const Adam*>(&opt))
    return "adam";
  throw std::invalid_argument("optimizer state: unsupported optimizer type (only SGD and Adam)");
}

std::vector<torch::Tensor> all_params(const torch::optim::Optimizer& opt) {
  std::vector<torch::Tensor> out;
  for (const auto& g : opt.param_groups())
    out.insert(out.end(), g.params().begin(), g.params().end());
  return out;
}

// Copy onto the parameter's device so the checkpoint struct is never aliased
// (the optimizer updates its buffers in place).
torch::Tensor restored(const torch::Tensor& src, const torch::Tensor& param,
                       const std::string& name) {
  if (src.sizes() != param.sizes())
    throw std::invalid_argument("optimizer state: " + name + " has shape "
                                + c10::str(src.sizes()) + " but the parameter has "
                                + c10::str(param.sizes()));
  if (param.is_floating_point() && !src.is_floating_point())
    throw std::invalid_argument("optimizer state: " + name + " holds "
                                + c10::toString(src.scalar_type())
                                + " values but the parameter is "
                                + c10::toString(param.scalar_type()));
  return src.to(param.device(), param.scalar_type(), /*non_blocking=*/false, /*copy=*/true);
}

std::map<std::string, double> group_options(const torch::optim::Optimizer& opt,
                                            const std::string& kind) {
  std::map<std::string, double> out;
  const auto& groups = opt.param_groups();
  for (std::size_t g = 0; g < groups.size(); ++g) {
    auto prefix = "group." + std::to_string(g) + ".";
    out[prefix + "params"] = static_cast<double>(groups[g].params().size());
    if (kind == "sgd") {
      const auto& o = static_cast<const SGDOptions&>(groups[g].options());
      out[prefix + "lr"] = o.lr();
      out[prefix + "momentum"] = o.momentum();
      out[prefix + "dampening"] = o.dampening();
      out[prefix + "weight_decay"] = o.weight_decay();
      out[prefix + "nesterov"] = o.nesterov() ? 1.0 : 0.0;
    } else {
      const auto& o = static_cast<const AdamOptions&>(groups[g].options());
      out[prefix + "lr"] = o.lr();
      out[prefix + "beta1"] = std::get<0>(o.betas());
      out[prefix + "beta2"] = std::get<1>(o.betas());
      out[prefix + "eps"] = o.eps();
      out[prefix + "weight_decay"] = o.weight_decay();
      out[prefix + "amsgrad"] = o.amsgrad() ? 1.0 : 0.0;
    }
  }
  return out;
}

void set_group_options(torch::optim::Optimizer& opt, const std::string& kind,
                       const std::map<std::string, double>& h) {
  auto& groups = opt.param_groups();
  for (std::size_t g = 0; g < groups.size(); ++g) {
    auto prefix = "group." + std::to_string(g) + ".";
    auto get = [&](const char* name) { return h.at(prefix + name); };
    if (kind == "sgd") {
      auto& o = static_cast<SGDOptions&>(groups[g].options());
      o.lr(get("lr")).momentum(get("momentum")).dampening(get("dampening"))
        .weight_decay(get("weight_decay")).nesterov(get("nesterov") != 0.0);
    } else {
      auto& o = static_cast<AdamOptions&>(groups[g].options());
      o.lr(get("lr")).betas({get("beta1"), get("beta2")}).eps(get("eps"))
        .weight_decay(get("weight_decay")).amsgrad(get("amsgrad") != 0.0);
    }
  }
}

// Splits "param.<i>.<field>"; throws on anything else.
std::pair<std::size_t, std::string> parse_name(const std::string& name, std::size_t n_params) {
  auto bad = [&](const std::string& why) {
    return std::invalid_argument("optimizer state: tensor '" + name + "': " + why);
  };
  if (name.rfind("param.", 0) != 0)
    throw bad("expected 'param.<index>.<field>'");
  auto dot = name.find('.', 6);
  if (dot == std::string::npos || dot == 6)
    throw bad("expected 'param.<index>.<field>'");
  std::size_t index = 0;
  for (std::size_t i = 6; i < dot; ++i) {
    if (name[i] < '0' || name[i] > '9' || index > n_params)
      throw bad("bad parameter index");
    index = index * 10 + static_cast<std::size_t>(name[i] - '0');
  }
  if (index >= n_params)
    throw bad("parameter index out of range (optimizer has " + std::to_string(n_params)
              + " parameters)");
  return {index, name.substr(dot + 1)};
}

} // namespace

optimizer_state capture_optimizer_state(const torch::optim::Optimizer& opt,
                                        tensor_capture how) {
  optimizer_state out;
  out.kind = kind_of(opt);
  for (auto& [name, value] : group_options(opt, out.kind))
    out.hyper_params.emplace_back(name, value);
  auto params = all_params(opt);
  const auto& states = opt.state();
  for (std::size_t i = 0; i < params.size(); ++i) {
    auto it = states.find(state_key(params[i]));
    if (it == states.end())
      continue;
    auto prefix = "param." + std::to_string(i) + ".";
    if (out.kind == "sgd") {
      const auto& s = static_cast<const SGDParamState&>(*it->second);
      if (s.momentum_buffer().defined())
        out.tensors.emplace_back(prefix + "momentum_buffer",
                                 host_tensor(s.momentum_buffer(), how));
    } else {
      const auto& s = static_cast<const AdamParamState&>(*it->second);
      out.tensors.emplace_back(prefix + "step", torch::tensor(s.step(), torch::kInt64));
      out.tensors.emplace_back(prefix + "exp_avg", host_tensor(s.exp_avg(), how));
      out.tensors.emplace_back(prefix + "exp_avg_sq", host_tensor(s.exp_avg_sq(), how));
      if (s.max_exp_avg_sq().defined())
        out.tensors.emplace_back(prefix + "max_exp_avg_sq", host_tensor(s.max_exp_avg_sq(), how));
    }
  }
  return out;
}

void load_optimizer_state(torch::optim::Optimizer& opt, const optimizer_state& state) {
  auto kind = kind_of(opt);
  if (state.kind != kind)
    throw std::invalid_argument("optimizer state: saved for '" + state.kind
                                + "' but the optimizer is '" + kind + "'");
  auto expected = group_options(opt, kind);
  std::map<std::string, double> saved;
  for (const auto& [name, value] : state.hyper_params) {
    if (!expected.count(name))
      throw std::invalid_argument("optimizer state: unexpected hyper-parameter '" + name
                                  + "' (param groups differ)");
    saved[name] = value;
  }
  for (const auto& [name, value] : expected) {
    auto it = saved.find(name);
    if (it == saved.end())
      throw std::invalid_argument("optimizer state: missing hyper-parameter '" + name + "'");
    if (name.size() > 7 && name.compare(name.size() - 7, 7, ".params") == 0
        && it->second != value)
      throw std::invalid_argument("optimizer state: " + name + " is "
                                  + std::to_string(static_cast<long long>(it->second))
                                  + " but the optimizer has "
                                  + std::to_string(static_cast<long long>(value)));
  }

  auto params = all_params(opt);
  std::map<std::size_t, std::map<std::string, torch::Tensor>> per_param;
  for (const auto& [name, t] : state.tensors) {
    auto [index, field] = parse_name(name, params.size());
    if (!t.defined())
      throw std::invalid_argument("optimizer state: tensor '" + name + "' is undefined");
    per_param[index][field] = t;
  }

  // Build everything first so a bad entry leaves the optimizer untouched.
  state_map fresh;
  for (auto& [index, fields] : per_param) {
    const auto& p = params[index];
    auto prefix = "param." + std::to_string(index) + ".";
    auto take = [&](const char* field) -> torch::Tensor {
      auto it = fields.find(field);
      if (it == fields.end())
        throw std::invalid_argument("optimizer state: missing tensor '" + prefix + field + "'");
      auto t = it->second;
      fields.erase(it);
      return t;
    };
    if (kind == "sgd") {
      auto s = std::make_unique<SGDParamState>();
      s->momentum_buffer(restored(take("momentum_buffer"), p, prefix + "momentum_buffer"));
      fresh[state_key(p)] = std::move(s);
    } else {
      auto s = std::make_unique<AdamParamState>();
      auto step = take("step");
      if (step.dim() != 0 || step.scalar_type() != torch::kInt64)
        throw std::invalid_argument("optimizer state: '" + prefix
                                    + "step' must be a 0-dim int64 tensor");
      s->step(step.item<int64_t>());
      s->exp_avg(restored(take("exp_avg"), p, prefix + "exp_avg"));
      s->exp_avg_sq(restored(take("exp_avg_sq"), p, prefix + "exp_avg_sq"));
      if (fields.count("max_exp_avg_sq"))
        s->max_exp_avg_sq(restored(take("max_exp_avg_sq"), p, prefix + "max_exp_avg_sq"));
      fresh[state_key(p)] = std::move(s);
    }
    if (!fields.empty())
      throw std::invalid_argument("optimizer state: unknown tensor '" + prefix
                                  + fields.begin()->first + "' for " + kind);
  }
  set_group_options(opt, kind, saved);
  opt.state() = std::move(fresh);
}

} // namespace asteroid::serialization
