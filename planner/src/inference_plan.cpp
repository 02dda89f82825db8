#include "asteroid/planner/inference_plan.hpp"

#include <algorithm>
#include <set>

#include <nlohmann/json.hpp>

#include "asteroid/planner/error.hpp"

namespace asteroid::planner {

namespace {

int64_t input_bytes(const model_profile& profile, int layer) {
  return layer == 0 ? profile.input_bytes_per_sample
                    : profile.layers[static_cast<size_t>(layer - 1)].output_bytes_per_sample;
}

} // namespace

int64_t inference_memory_bytes(const model_profile& profile, int first, int end,
                               const inference_options& options) {
  int64_t weights = 0, working = 0;
  for (int l = first; l < end; ++l) {
    const auto& lp = profile.layers[static_cast<size_t>(l)];
    weights += lp.param_bytes;
    working = std::max(working, lp.working_bytes_per_sample);
  }
  const int64_t b = options.micro_batch;
  const int64_t queues = options.queue_depth * b
                         * (input_bytes(profile, first)
                            + profile.layers[static_cast<size_t>(end - 1)].output_bytes_per_sample);
  return weights + queues + working * b;
}

void evaluate_inference(inference_plan& p, const model_profile& profile,
                        const cluster& c, const inference_options& options) {
  if (options.micro_batch < 1)
    throw planner_error("inference plan: micro-batch must be >= 1, got "
                        + std::to_string(options.micro_batch));
  if (p.stages.empty())
    throw planner_error("inference plan: no stages");
  const int L = profile.num_layers();
  std::set<int> used;
  int at = 0;
  for (size_t s = 0; s < p.stages.size(); ++s) {
    const auto& st = p.stages[s];
    auto name = "inference plan: stage " + std::to_string(s);
    if (st.first_layer != at || st.end_layer <= st.first_layer || st.end_layer > L)
      throw planner_error(name + ": layers [" + std::to_string(st.first_layer) + ", "
                          + std::to_string(st.end_layer) + ") do not follow layer "
                          + std::to_string(at) + " of " + std::to_string(L));
    if (st.device < 0 || st.device >= c.size())
      throw planner_error(name + ": device " + std::to_string(st.device)
                          + " is not one of the cluster's " + std::to_string(c.size()));
    if (!used.insert(st.device).second)
      throw planner_error(name + ": device " + std::to_string(st.device)
                          + " already runs another stage");
    at = st.end_layer;
  }
  if (at != L)
    throw planner_error("inference plan: the stages end at layer " + std::to_string(at)
                        + ", the model has " + std::to_string(L));
  const double b = static_cast<double>(options.micro_batch);
  const double slowdown = p.stages.size() > 1 ? c.co_location_slowdown : 1.0;
  p.micro_batch = options.micro_batch;
  p.bottleneck_s = 0.0;
  p.latency_s = 0.0;
  for (size_t s = 0; s < p.stages.size(); ++s) {
    auto& st = p.stages[s];
    double t = 0.0;
    for (int l = st.first_layer; l < st.end_layer; ++l)
      t += profile.layers[static_cast<size_t>(l)].forward_time(b);
    st.compute_s = t * slowdown / c.devices[static_cast<size_t>(st.device)].speed;
    st.send_s = 0.0;
    if (s + 1 < p.stages.size()) {
      int to = p.stages[s + 1].device;
      double bytes = b * static_cast<double>(
                           profile.layers[static_cast<size_t>(st.end_layer - 1)]
                             .output_bytes_per_sample);
      st.send_s = bytes / c.payload_rate(st.device, to, traffic::activations)
                  + c.latency(st.device, to);
    }
    st.memory_bytes = inference_memory_bytes(profile, st.first_layer, st.end_layer, options);
    p.bottleneck_s = std::max({p.bottleneck_s, st.compute_s, st.send_s});
    p.latency_s += st.compute_s + st.send_s;
  }
  p.samples_per_s = p.bottleneck_s > 0 ? b / p.bottleneck_s : 0.0;
}

bool inference_fits_memory(const inference_plan& p, const cluster& c) {
  for (const auto& st : p.stages)
    if (st.memory_bytes > c.devices[static_cast<size_t>(st.device)].memory_bytes)
      return false;
  return true;
}

void to_json(nlohmann::json& j, const inference_stage& s) {
  j = {{"first_layer", s.first_layer}, {"end_layer", s.end_layer},
       {"device", s.device},           {"compute_s", s.compute_s},
       {"send_s", s.send_s},           {"memory_bytes", s.memory_bytes}};
}

void to_json(nlohmann::json& j, const inference_plan& p) {
  j = {{"mode", "inference"},          {"planner", p.planner},
       {"micro_batch", p.micro_batch}, {"stages", p.stages},
       {"bottleneck_s", p.bottleneck_s}, {"samples_per_s", p.samples_per_s},
       {"latency_s", p.latency_s}};
}

} // namespace asteroid::planner
