#include "asteroid/training/profiler.hpp"

#include "asteroid/kernels/compute_device.hpp"
#include "asteroid/training/optimizer.hpp"
#include "asteroid/training/memory_tracker.hpp"

#include <algorithm>
#include <chrono>
#include <optional>
#include <sstream>
#include <stdexcept>

namespace asteroid::training {

namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

double median(std::vector<double> xs) {
  std::sort(xs.begin(), xs.end());
  auto n = xs.size();
  return n % 2 ? xs[n / 2] : 0.5 * (xs[n / 2 - 1] + xs[n / 2]);
}

torch::Tensor random_input(const models::sequential_model& model, int layer,
                           int64_t batch, torch::Device device, bool needs_grad) {
  std::vector<int64_t> shape{batch};
  auto per_sample = model->input_shape(layer);
  shape.insert(shape.end(), per_sample.begin(), per_sample.end());
  if (layer == 0 && model->input_dtype() == torch::kLong)
    return torch::randint(0, 100, shape, torch::dtype(torch::kLong).device(device)); // valid token ids
  auto x = torch::randn(shape, torch::device(device));
  if (layer > 0 && needs_grad)
    x.requires_grad_(true);
  return x;
}

int64_t tensor_bytes(const std::vector<torch::Tensor>& ts) {
  int64_t n = 0;
  for (auto& t : ts)
    n += t.numel() * static_cast<int64_t>(t.element_size());
  return n;
}

/// Times what a replica of `params` does once per training step besides its
/// micro-batches: the optimizer's step (its state made by an untimed first
/// step). The median of `repeats` after `warmup` runs, times `slowdown`.
/// The weights are put back as they were. (The gradients need no copy
/// around a ring all-reduce: from the second step on they are views of its
/// buffer, actors' ring_all_reduce.cpp.)
void time_update(const std::vector<torch::Tensor>& params, const profiler_options& options,
                 torch::Device device, planner::layer_profile& lp) {
  if (params.empty())
    return;
  std::vector<torch::Tensor> saved;
  {
    torch::NoGradGuard no_grad;
    for (auto& p : params) {
      saved.push_back(p.detach().clone());
      p.mutable_grad() = torch::randn_like(p);
    }
  }
  optimizer_options o;
  o.kind = options.optimizer;
  o.lr = 1e-6;
  auto optimizer = make_optimizer(o, params);
  std::vector<double> step;
  for (int r = 0; r < 1 + options.warmup + options.repeats; ++r) {
    kernels::synchronize(device);
    auto t0 = clock_type::now();
    optimizer->step();
    kernels::synchronize(device);
    auto ts = seconds_since(t0);
    if (r > options.warmup)
      step.push_back(ts * options.slowdown);
  }
  lp.optimizer_step_s = median(step);
  torch::NoGradGuard no_grad;
  for (size_t k = 0; k < params.size(); ++k) {
    params[k].copy_(saved[k]);
    params[k].mutable_grad() = torch::Tensor{};
  }
}

} // namespace

planner::model_profile profile_model(models::sequential_model& model,
                                     const std::string& model_name,
                                     const profiler_options& options) {
  if (options.batch_sizes.empty())
    throw std::invalid_argument("profiler: no batch sizes given");
  if (!std::is_sorted(options.batch_sizes.begin(), options.batch_sizes.end())
      || options.batch_sizes.front() <= 0)
    throw std::invalid_argument("profiler: batch sizes must be positive and "
                                "ascending");
  if (options.repeats <= 0 || options.warmup < 0 || !(options.slowdown > 0))
    throw std::invalid_argument("profiler: repeats must be positive, warm-up "
                                "non-negative and slowdown positive");
  memory_tracker memory;
  planner::model_profile profile;
  profile.model = model_name;
  profile.device = options.device;
  if (options.slowdown != 1.0) {
    std::ostringstream os;
    os << options.device << " (emulated slowdown x" << options.slowdown << ")";
    profile.device = os.str();
  }
  const auto device = options.compute_device;
  const bool gpu = device.is_cuda();
  model->to(device);
  {
    auto x = random_input(model, 0, 1, device, false);
    profile.input_bytes_per_sample = x.numel() * x.element_size();
  }
  // What tensors hold now on the profiled device.
  auto held_bytes = [&] {
    return gpu ? kernels::device_memory_stats(device).allocated_now : memory.current_bytes();
  };
  const bool training = !options.forward_only;
  model->train(training);
  // Inference forwards record nothing for a backward.
  std::optional<torch::NoGradGuard> no_grad;
  if (!training)
    no_grad.emplace();
  auto state_factor = options.optimizer == optimizer_kind::adam ? 2 : 1;
  for (int i = 0; i < model->size(); ++i) {
    planner::layer_profile lp;
    lp.name = model->layer_name(i);
    std::vector<torch::Tensor> buffers;
    for (auto& b : model->layer_module(i)->buffers())
      buffers.push_back(b);
    auto params = model->range_parameters(i, i + 1);
    lp.param_bytes = tensor_bytes(params) + tensor_bytes(buffers);
    lp.optimizer_state_bytes = state_factor * tensor_bytes(params);
    for (auto b : options.batch_sizes) {
      std::vector<double> fwd, bwd;
      int64_t peak_extra = 0, held_after_forward = 0;
      for (int r = 0; r < options.warmup + options.repeats; ++r) {
        auto x = random_input(model, i, b, device, training);
        kernels::synchronize(device);
        auto base = held_bytes();
        memory.reset_peak();
        kernels::reset_device_memory_peak(device);
        auto t0 = clock_type::now();
        auto y = model->forward_range(x, i, i + 1);
        kernels::synchronize(device);
        auto tf = seconds_since(t0);
        // What the forward left alive for the backward: the output and every
        // tensor autograd saved (a convolution's input, a norm's statistics,
        // an activation's output), which a pipeline stage holds per in-flight
        // micro-batch.
        held_after_forward = std::max(held_after_forward, held_bytes() - base);
        double tb = 0;
        if (training) {
          auto grad = torch::randn_like(y);
          kernels::synchronize(device);
          t0 = clock_type::now();
          y.backward(grad);
          kernels::synchronize(device);
          tb = seconds_since(t0);
        }
        auto peak = gpu ? kernels::device_memory_stats(device).allocated_peak
                        : memory.peak_bytes();
        peak_extra = std::max(peak_extra, peak - base);
        if (r >= options.warmup) {
          fwd.push_back(tf * options.slowdown);
          bwd.push_back(tb * options.slowdown);
        }
        if (r == 0 && b == options.batch_sizes.back())
          lp.output_bytes_per_sample = y.numel() * y.element_size() / b;
        for (auto& p : params)
          p.mutable_grad() = torch::Tensor{};
      }
      lp.batch_sizes.push_back(b);
      lp.forward_s.push_back(median(fwd));
      lp.backward_s.push_back(median(bwd));
      if (b == options.batch_sizes.back()) {
        // The stash is counted per in-flight micro-batch and the gradients
        // with the weights; working memory is what comes on top of both.
        // Only a backward allocates the parameters' gradients. An inference
        // forward should leave its output alone: anything beyond it is what
        // autograd kept.
        const int64_t grads = training ? tensor_bytes(params) : 0;
        lp.working_bytes_per_sample =
          std::max<int64_t>(0, peak_extra - held_after_forward - grads) / b;
        lp.stashed_bytes_per_sample =
          training ? held_after_forward / b
                   : std::max<int64_t>(0, held_after_forward / b - lp.output_bytes_per_sample);
      }
    }
    if (training)
      time_update(params, options, device, lp);
    profile.layers.push_back(std::move(lp));
  }
  return profile;
}

} // namespace asteroid::training
