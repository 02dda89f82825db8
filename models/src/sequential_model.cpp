#include "asteroid/models/sequential_model.hpp"

#include <map>
#include <sstream>
#include <stdexcept>

namespace asteroid::models {

std::string to_string(const shape_t& shape) {
  std::ostringstream out;
  out << '[';
  for (size_t i = 0; i < shape.size(); ++i)
    out << (i ? ", " : "") << shape[i];
  out << ']';
  return out.str();
}

namespace {

shape_t per_sample(const torch::Tensor& t) {
  auto sizes = t.sizes();
  return shape_t(sizes.begin() + 1, sizes.end());
}

/// Restores a module's training flag when leaving a scope.
class train_mode_guard {
public:
  explicit train_mode_guard(torch::nn::Module& m) : m_(m), was_(m.is_training()) {}
  ~train_mode_guard() { m_.train(was_); }
  train_mode_guard(const train_mode_guard&) = delete;
  train_mode_guard& operator=(const train_mode_guard&) = delete;

private:
  torch::nn::Module& m_;
  bool was_;
};

} // namespace

sequential_model_impl::sequential_model_impl(shape_t input_shape,
                                             torch::Dtype input_dtype,
                                             layer_range built)
  : input_shape_(std::move(input_shape)), input_dtype_(input_dtype),
    built_(built) {
  if (built_.first < 0 || (built_.end >= 0 && built_.end <= built_.first))
    throw std::invalid_argument("sequential_model: built layers "
                                + models::to_string(built_)
                                + " are not a non-empty range");
}

bool sequential_model_impl::is_built(int i) const {
  return !at(i).module.is_empty();
}

void sequential_model_impl::push_back(std::string name,
                                      torch::nn::AnyModule module,
                                      shape_t out_shape) {
  if (module.is_empty())
    throw std::invalid_argument("sequential_model: layer '" + name
                                + "' has no module");
  if (!built_.contains(static_cast<int>(size())))
    module = {};
  append(std::move(name), std::move(module), std::move(out_shape));
}

void sequential_model_impl::push_back(std::string name, const layer_factory& make,
                                      shape_t out_shape) {
  torch::nn::AnyModule module;
  if (built_.contains(static_cast<int>(size()))) {
    module = make();
    if (module.is_empty())
      throw std::invalid_argument("sequential_model: layer '" + name
                                  + "' has no module");
  }
  append(std::move(name), std::move(module), std::move(out_shape));
}

void sequential_model_impl::append(std::string name, torch::nn::AnyModule module,
                                   shape_t out_shape) {
  if (name.empty())
    throw std::invalid_argument("sequential_model: layer name is empty");
  if (name.find('.') != std::string::npos)
    throw std::invalid_argument("sequential_model: layer name '" + name
                                + "' contains '.'");
  for (const auto& l : layers_)
    if (l.name == name)
      throw std::invalid_argument("sequential_model: duplicate layer name '"
                                  + name + "'");
  if (!module.is_empty())
    register_module(name, module.ptr());
  shape_t in_shape = output_shape();
  layers_.push_back(
    layer{std::move(name), std::move(module), std::move(in_shape), std::move(out_shape)});
}

void sequential_model_impl::push_back(std::string name,
                                      torch::nn::AnyModule module) {
  if (module.is_empty())
    throw std::invalid_argument("sequential_model: layer '" + name
                                + "' has no module");
  shape_t in = output_shape();
  shape_t batch_shape{1};
  batch_shape.insert(batch_shape.end(), in.begin(), in.end());
  auto ptr = module.ptr();
  bool was_training = ptr->is_training();
  ptr->eval();
  torch::NoGradGuard no_grad;
  torch::Tensor y;
  try {
    // The dry run happens on the device of the module's first parameter.
    auto device = torch::Device(torch::kCPU);
    auto params = ptr->parameters();
    if (!params.empty())
      device = params.front().device();
    y = module.forward(torch::zeros(batch_shape, torch::TensorOptions()
                                                   .dtype(input_dtype_at_end())
                                                   .device(device)));
  } catch (const c10::Error& e) {
    ptr->train(was_training);
    throw std::invalid_argument("sequential_model: layer '" + name
                                + "' rejects input of shape " + to_string(in)
                                + ": " + e.what_without_backtrace());
  }
  ptr->train(was_training);
  push_back(std::move(name), std::move(module), per_sample(y));
}

torch::Dtype sequential_model_impl::input_dtype_at_end() const {
  // Only the first layer sees the model's input dtype; every later layer
  // consumes the float activations of its predecessor.
  return layers_.empty() ? input_dtype_ : torch::kFloat;
}

const std::string& sequential_model_impl::layer_name(int i) const {
  return at(i).name;
}

int sequential_model_impl::index_of(const std::string& name) const {
  for (size_t i = 0; i < layers_.size(); ++i)
    if (layers_[i].name == name)
      return static_cast<int>(i);
  throw std::out_of_range("sequential_model: no layer named '" + name + "'");
}

shape_t sequential_model_impl::input_shape(int i) const {
  return at(i).input_shape;
}

shape_t sequential_model_impl::output_shape(int i) const {
  return at(i).output_shape;
}

shape_t sequential_model_impl::output_shape() const {
  return layers_.empty() ? input_shape_ : layers_.back().output_shape;
}

const layer& sequential_model_impl::at(int i) const {
  if (i < 0 || i >= size())
    throw std::out_of_range("sequential_model: layer index " + std::to_string(i)
                            + " out of range [0, " + std::to_string(size())
                            + ")");
  return layers_[static_cast<size_t>(i)];
}

std::shared_ptr<torch::nn::Module>
sequential_model_impl::layer_module(int i) const {
  resolve_range(i, i + 1, "layer_module");
  return at(i).module.ptr();
}

int sequential_model_impl::resolve_range(int first, int end,
                                         const char* what) const {
  int n = static_cast<int>(size());
  if (end == -1)
    end = n;
  if (first < 0 || end > n || first > end)
    throw std::out_of_range(std::string("sequential_model::") + what
                            + ": bad layer range [" + std::to_string(first)
                            + ", " + std::to_string(end) + ") for a model of "
                            + std::to_string(n) + " layers");
  for (int i = first; i < end; ++i)
    if (layers_[static_cast<size_t>(i)].module.is_empty())
      throw std::logic_error(std::string("sequential_model::") + what
                             + ": layer '" + layers_[static_cast<size_t>(i)].name
                             + "' (" + std::to_string(i)
                             + ") is not built here: this model builds layers "
                             + models::to_string(built_));
  return end;
}

torch::Tensor sequential_model_impl::forward(torch::Tensor x) {
  return forward_range(std::move(x), 0, -1);
}

torch::Tensor sequential_model_impl::forward_range(torch::Tensor x, int first,
                                                   int end) {
  end = resolve_range(first, end, "forward_range");
  for (int i = first; i < end; ++i)
    x = layers_[static_cast<size_t>(i)].module.forward(std::move(x));
  return x;
}

std::vector<torch::Tensor>
sequential_model_impl::range_parameters(int first, int end) const {
  end = resolve_range(first, end, "range_parameters");
  std::vector<torch::Tensor> result;
  for (int i = first; i < end; ++i) {
    auto ps = layers_[static_cast<size_t>(i)].module.ptr()->parameters();
    result.insert(result.end(), ps.begin(), ps.end());
  }
  return result;
}

named_tensors sequential_model_impl::range_state(int first, int end) const {
  end = resolve_range(first, end, "range_state");
  named_tensors result;
  for (int i = first; i < end; ++i) {
    const auto& l = layers_[static_cast<size_t>(i)];
    auto ptr = l.module.ptr();
    for (const auto& p : ptr->named_parameters())
      result.emplace_back(l.name + "." + p.key(), p.value());
    for (const auto& b : ptr->named_buffers())
      result.emplace_back(l.name + "." + b.key(), b.value());
  }
  return result;
}

void sequential_model_impl::load_range_state(int first, int end,
                                             const named_tensors& state) {
  end = resolve_range(first, end, "load_range_state");
  auto own = range_state(first, end);
  std::map<std::string, torch::Tensor> given;
  for (const auto& [name, t] : state) {
    if (!given.emplace(name, t).second)
      throw std::invalid_argument("load_range_state: tensor '" + name
                                  + "' appears twice");
  }
  std::string range = "layers [" + std::to_string(first) + ", "
                      + std::to_string(end) + ")";
  // Validate everything before copying anything, so a bad state leaves the
  // model untouched.
  for (const auto& [name, dst] : own) {
    auto it = given.find(name);
    if (it == given.end())
      throw std::invalid_argument("load_range_state: tensor '" + name
                                  + "' of " + range + " is missing");
    if (!it->second.defined())
      throw std::invalid_argument("load_range_state: tensor '" + name
                                  + "' is undefined");
    if (it->second.sizes() != dst.sizes())
      throw std::invalid_argument(
        "load_range_state: tensor '" + name + "' has shape "
        + to_string(it->second.sizes().vec()) + ", expected "
        + to_string(dst.sizes().vec()));
    // Integers copied into weights would be truncated values taken silently
    // (a checkpoint or snapshot no run of this model wrote).
    if (dst.is_floating_point() && !it->second.is_floating_point())
      throw std::invalid_argument("load_range_state: tensor '" + name + "' holds "
                                  + std::string(c10::toString(it->second.scalar_type()))
                                  + " values, expected "
                                  + std::string(c10::toString(dst.scalar_type())));
  }
  if (given.size() != own.size()) {
    std::map<std::string, bool> known;
    for (const auto& [name, dst] : own)
      known[name] = true;
    for (const auto& [name, t] : given)
      if (!known.count(name))
        throw std::invalid_argument("load_range_state: unexpected tensor '"
                                    + name + "' for " + range);
  }
  torch::NoGradGuard no_grad;
  for (auto& [name, dst] : own)
    dst.copy_(given.at(name));
}

int64_t sequential_model_impl::parameter_count(int first, int end) const {
  int64_t n = 0;
  for (const auto& p : range_parameters(first, end))
    n += p.numel();
  return n;
}

void sequential_model_impl::check_shapes(int64_t batch) {
  resolve_range(0, -1, "check_shapes");
  train_mode_guard guard(*this);
  eval();
  torch::NoGradGuard no_grad;
  auto device = torch::Device(torch::kCPU);
  auto params = parameters();
  if (!params.empty())
    device = params.front().device();
  shape_t batch_shape{batch};
  batch_shape.insert(batch_shape.end(), input_shape_.begin(), input_shape_.end());
  auto x = torch::zeros(batch_shape,
                        torch::TensorOptions().dtype(input_dtype_).device(device));
  for (auto& l : layers_) {
    if (per_sample(x) != l.input_shape)
      throw std::logic_error("sequential_model: layer '" + l.name + "' gets "
                             + to_string(per_sample(x)) + ", declared input "
                             + to_string(l.input_shape));
    x = l.module.forward(x);
    if (x.size(0) != batch || per_sample(x) != l.output_shape)
      throw std::logic_error("sequential_model: layer '" + l.name
                             + "' produces " + to_string(x.sizes().vec())
                             + ", declared per-sample output "
                             + to_string(l.output_shape));
  }
}

void sequential_model_impl::pretty_print(std::ostream& stream) const {
  int64_t total = 0;
  for (const auto& p : parameters())
    total += p.numel();
  stream << "asteroid::models::sequential_model(input=" << to_string(input_shape_)
         << ", " << size() << " layers, " << total << " parameters";
  if (!built_.whole())
    stream << " in the layers it builds, " << models::to_string(built_);
  stream << ")";
  for (const auto& l : layers_) {
    stream << "\n  " << l.name << ": " << to_string(l.input_shape) << " -> "
           << to_string(l.output_shape) << ", ";
    if (l.module.is_empty()) {
      stream << "not built";
      continue;
    }
    int64_t n = 0;
    for (const auto& p : l.module.ptr()->parameters())
      n += p.numel();
    stream << n << " parameters";
  }
}

} // namespace asteroid::models
