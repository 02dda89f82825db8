// Planners for pipelined inference: EdgePipe's dynamic program over device
// types, an exhaustive oracle and two baselines (inference_planner.hpp).
#include "asteroid/planner/inference_planner.hpp"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <tuple>

#include "asteroid/planner/error.hpp"

namespace asteroid::planner {

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();

/// Devices that compute alike: the same type name, speed and memory.
struct device_type {
  std::vector<int> devices; ///< ascending cluster indices
  double speed = 1.0;
  int64_t memory = 0;
};

std::vector<device_type> group_by_type(const cluster& c) {
  std::map<std::tuple<std::string, double, int64_t>, int> index;
  std::vector<device_type> types;
  for (int d = 0; d < c.size(); ++d) {
    const auto& dev = c.devices[static_cast<size_t>(d)];
    auto key = std::make_tuple(dev.type, dev.speed, dev.memory_bytes);
    auto [it, fresh] = index.emplace(key, static_cast<int>(types.size()));
    if (fresh)
      types.push_back({{}, dev.speed, dev.memory_bytes});
    types[static_cast<size_t>(it->second)].devices.push_back(d);
  }
  return types;
}

/// Forward seconds of layers [0, l) for one request, on the profile's device.
std::vector<double> forward_prefix(const model_profile& profile, int64_t micro_batch) {
  std::vector<double> prefix(static_cast<size_t>(profile.num_layers()) + 1, 0.0);
  for (int l = 0; l < profile.num_layers(); ++l)
    prefix[static_cast<size_t>(l) + 1] =
      prefix[static_cast<size_t>(l)]
      + profile.layers[static_cast<size_t>(l)].forward_time(static_cast<double>(micro_batch));
  return prefix;
}

void check_inputs(const model_profile& profile, const cluster& c,
                  const inference_options& options) {
  if (profile.num_layers() < 1)
    throw planner_error("inference planner: the profile has no layers");
  if (c.size() < 1)
    throw planner_error("inference planner: the cluster has no devices");
  if (options.micro_batch < 1)
    throw planner_error("inference planner: micro-batch must be >= 1, got "
                        + std::to_string(options.micro_batch));
  if (options.queue_depth < 0)
    throw planner_error("inference planner: queue depth must be >= 0, got "
                        + std::to_string(options.queue_depth));
}

inference_plan finished(inference_plan p, const std::string& planner,
                        const model_profile& profile, const cluster& c,
                        const inference_options& options) {
  p.planner = planner;
  evaluate_inference(p, profile, c, options);
  return p;
}

} // namespace

inference_plan plan_inference_on_device(const model_profile& profile, const cluster& c,
                                        const inference_options& options) {
  check_inputs(profile, c, options);
  const int L = profile.num_layers();
  const auto need = inference_memory_bytes(profile, 0, L, options);
  int best = -1;
  for (int d = 0; d < c.size(); ++d) {
    const auto& dev = c.devices[static_cast<size_t>(d)];
    if (dev.memory_bytes >= need
        && (best < 0 || dev.speed > c.devices[static_cast<size_t>(best)].speed))
      best = d;
  }
  if (best < 0)
    throw planner_error("inference planner (on-device): no device holds the whole model ("
                        + std::to_string(need) + " bytes with its queues)");
  inference_plan p;
  p.stages.push_back({0, L, best});
  return finished(p, "on-device", profile, c, options);
}

inference_plan plan_inference_straight(const model_profile& profile, const cluster& c,
                                       const inference_options& options) {
  check_inputs(profile, c, options);
  const int L = profile.num_layers();
  const int S = std::min(L, c.size());
  auto prefix = forward_prefix(profile, options.micro_batch);
  const double total = prefix.back();
  inference_plan p;
  int at = 0;
  for (int s = 0; s < S; ++s) {
    int end = L - (S - 1 - s); // leave a layer for every later stage
    if (s + 1 < S) {
      double target = total * (s + 1) / S;
      int e = at + 1;
      while (e < end && prefix[static_cast<size_t>(e)] < target)
        ++e;
      end = e;
    }
    p.stages.push_back({at, end, s});
    at = end;
  }
  return finished(p, "straight", profile, c, options);
}

inference_plan plan_inference_exhaustive(const model_profile& profile, const cluster& c,
                                         const inference_options& options,
                                         int64_t max_evaluations) {
  check_inputs(profile, c, options);
  const int L = profile.num_layers(), D = c.size();
  // Cuts into s stages: C(L-1, s-1); ordered devices: D! / (D-s)!.
  double evaluations = 0.0;
  for (int s = 1; s <= std::min(L, D); ++s) {
    double cuts = 1.0, orders = 1.0;
    for (int i = 1; i < s; ++i)
      cuts = cuts * (L - i) / i;
    for (int i = 0; i < s; ++i)
      orders *= D - i;
    evaluations += cuts * orders;
  }
  if (evaluations > static_cast<double>(max_evaluations)) {
    char count[32];
    std::snprintf(count, sizeof(count), "%.3g", evaluations);
    throw planner_error("inference planner (exhaustive): " + std::to_string(L)
                        + " layers on " + std::to_string(D) + " devices need " + count
                        + " evaluations, over the limit of "
                        + std::to_string(max_evaluations));
  }
  auto prefix = forward_prefix(profile, options.micro_batch);
  const double b = static_cast<double>(options.micro_batch);
  inference_plan best;
  double best_s = inf;
  std::vector<int> ends, devices;
  std::vector<char> used(static_cast<size_t>(D), 0);
  // Stage i covers [start, ends[i]) on devices[i]; `worst` is the slowest
  // stage or link so far.
  std::function<void(int, int, double, double)> place = [&](int start, int stages_left,
                                                            double worst, double slowdown) {
    if (start == L) {
      if (worst < best_s) {
        best_s = worst;
        best.stages.clear();
        int first = 0;
        for (size_t i = 0; i < ends.size(); ++i) {
          best.stages.push_back({first, ends[i], devices[i]});
          first = ends[i];
        }
      }
      return;
    }
    if (stages_left == 0)
      return;
    // Every later stage keeps one layer at least; the last takes the rest.
    for (int end = stages_left == 1 ? L : start + 1; end <= L - (stages_left - 1); ++end) {
      const auto mem = inference_memory_bytes(profile, start, end, options);
      for (int d = 0; d < D; ++d) {
        const auto& dev = c.devices[static_cast<size_t>(d)];
        if (used[static_cast<size_t>(d)] || mem > dev.memory_bytes)
          continue;
        double t = (prefix[static_cast<size_t>(end)] - prefix[static_cast<size_t>(start)])
                   * slowdown / dev.speed;
        double w = std::max(worst, t);
        if (!devices.empty()) {
          int from = devices.back();
          double bytes = b * static_cast<double>(
                               profile.layers[static_cast<size_t>(start - 1)]
                                 .output_bytes_per_sample);
          w = std::max(w, bytes / c.payload_rate(from, d, traffic::activations)
                            + c.latency(from, d));
        }
        used[static_cast<size_t>(d)] = 1;
        ends.push_back(end);
        devices.push_back(d);
        place(end, stages_left - 1, w, slowdown);
        ends.pop_back();
        devices.pop_back();
        used[static_cast<size_t>(d)] = 0;
      }
    }
  };
  for (int s = 1; s <= std::min(L, D); ++s)
    place(0, s, 0.0, s > 1 ? c.co_location_slowdown : 1.0);
  if (best.stages.empty())
    throw planner_error("inference planner (exhaustive): no pipeline fits the devices' memory");
  return finished(best, "exhaustive", profile, c, options);
}

inference_plan plan_inference(const model_profile& profile, const cluster& c,
                              const inference_options& options, int64_t max_states) {
  check_inputs(profile, c, options);
  const int L = profile.num_layers();
  const auto types = group_by_type(c);
  const int K = static_cast<int>(types.size());
  // Mixed-radix index of "how many devices of each type are used".
  std::vector<int64_t> stride(static_cast<size_t>(K));
  int64_t C = 1;
  for (int k = 0; k < K; ++k) {
    stride[static_cast<size_t>(k)] = C;
    C *= static_cast<int64_t>(types[static_cast<size_t>(k)].devices.size()) + 1;
    if (C > max_states)
      break;
  }
  const double states = static_cast<double>(L + 1) * static_cast<double>(C) * K;
  if (C > max_states || states > static_cast<double>(max_states))
    throw planner_error("inference planner: " + std::to_string(c.size()) + " devices of "
                        + std::to_string(K) + " distinct types (type, speed, memory) "
                        "make more than " + std::to_string(max_states)
                        + " planning states; give devices that compute alike the same "
                          "type, speed and memory");
  // The slowest link between two devices of types a and b (a != b devices).
  std::vector<double> link_bw(static_cast<size_t>(K * K), inf);
  std::vector<double> link_lat(static_cast<size_t>(K * K), 0.0);
  for (int a = 0; a < K; ++a)
    for (int bt = 0; bt < K; ++bt)
      for (int i : types[static_cast<size_t>(a)].devices)
        for (int j : types[static_cast<size_t>(bt)].devices) {
          if (i == j)
            continue;
          auto& bw = link_bw[static_cast<size_t>(a * K + bt)];
          auto& lat = link_lat[static_cast<size_t>(a * K + bt)];
          bw = std::min(bw, c.bandwidth(i, j));
          lat = std::max(lat, c.latency(i, j));
        }
  auto prefix = forward_prefix(profile, options.micro_batch);
  const double b = static_cast<double>(options.micro_batch);
  // Every path priced as a multi-device plan; one-stage plans are priced
  // exactly by the on-device baseline below.
  const double slowdown = c.co_location_slowdown;
  std::vector<int64_t> memory(static_cast<size_t>((L + 1) * (L + 1)), 0);
  for (int f = 0; f < L; ++f)
    for (int e = f + 1; e <= L; ++e)
      memory[static_cast<size_t>(f * (L + 1) + e)] = inference_memory_bytes(profile, f, e, options);
  const auto at = [&](int l, int64_t cidx, int u) {
    return (static_cast<size_t>(l) * static_cast<size_t>(C) + static_cast<size_t>(cidx))
             * static_cast<size_t>(K)
           + static_cast<size_t>(u);
  };
  const size_t N = static_cast<size_t>(L + 1) * static_cast<size_t>(C) * static_cast<size_t>(K);
  std::vector<double> value(N, inf);
  std::vector<int32_t> parent_layer(N, -1);
  std::vector<int16_t> parent_type(N, -1);
  auto count_of = [&](int64_t cidx, int k) {
    auto n = static_cast<int64_t>(types[static_cast<size_t>(k)].devices.size()) + 1;
    return (cidx / stride[static_cast<size_t>(k)]) % n;
  };
  // Extends the pipelines that placed layers [0, start) ending on a device
  // of type u (-1: none yet) with the stage [start, e) on a device of type v.
  auto relax = [&](int64_t cidx, int u, double worst, int start) {
    for (int v = 0; v < K; ++v) {
      const auto& tv = types[static_cast<size_t>(v)];
      if (count_of(cidx, v) >= static_cast<int64_t>(tv.devices.size()))
        continue;
      double w = worst;
      if (u >= 0) {
        double bytes = b * c.wire_ratio_at(link_bw[static_cast<size_t>(u * K + v)],
                                           traffic::activations)
                       * static_cast<double>(
                         profile.layers[static_cast<size_t>(start - 1)].output_bytes_per_sample);
        auto bw = link_bw[static_cast<size_t>(u * K + v)];
        w = std::max(w, bytes / bw + link_lat[static_cast<size_t>(u * K + v)]);
      }
      const int64_t next = cidx + stride[static_cast<size_t>(v)];
      for (int e = start + 1; e <= L; ++e) {
        double t = (prefix[static_cast<size_t>(e)] - prefix[static_cast<size_t>(start)])
                   * slowdown / tv.speed;
        double cost = std::max(w, t);
        if (memory[static_cast<size_t>(start * (L + 1) + e)] > tv.memory)
          continue;
        auto& slot = value[at(e, next, v)];
        if (cost < slot) {
          slot = cost;
          parent_layer[at(e, next, v)] = start;
          parent_type[at(e, next, v)] = static_cast<int16_t>(u);
        }
      }
    }
  };
  relax(0, -1, 0.0, 0);
  for (int l = 1; l < L; ++l)
    for (int64_t cidx = 0; cidx < C; ++cidx)
      for (int u = 0; u < K; ++u) {
        double v = value[at(l, cidx, u)];
        if (v < inf)
          relax(cidx, u, v, l);
      }
  double best = inf;
  int64_t best_c = -1;
  int best_u = -1;
  for (int64_t cidx = 0; cidx < C; ++cidx)
    for (int u = 0; u < K; ++u)
      if (value[at(L, cidx, u)] < best) {
        best = value[at(L, cidx, u)];
        best_c = cidx;
        best_u = u;
      }
  std::optional<inference_plan> single;
  try {
    single = plan_inference_on_device(profile, c, options);
  } catch (const planner_error&) {
  }
  if (best_u < 0 && !single)
    throw planner_error("inference planner: no pipeline of " + std::to_string(L)
                        + " layers fits the memory of the " + std::to_string(c.size())
                        + " devices");
  if (best_u < 0 || (single && single->bottleneck_s <= best)) {
    single->planner = "edgepipe";
    return *single;
  }
  // Walk back from the end; each type's devices are taken in index order
  // from the first stage on.
  std::vector<std::pair<int, int>> ranges_types; // (first layer, type), last stage first
  int l = L, u = best_u;
  int64_t cidx = best_c;
  while (l > 0) {
    int first = parent_layer[at(l, cidx, u)];
    int prev = parent_type[at(l, cidx, u)];
    ranges_types.push_back({first, u});
    cidx -= stride[static_cast<size_t>(u)];
    l = first;
    u = prev;
  }
  std::reverse(ranges_types.begin(), ranges_types.end());
  inference_plan p;
  std::vector<size_t> taken(static_cast<size_t>(K), 0);
  for (size_t s = 0; s < ranges_types.size(); ++s) {
    auto [first, type] = ranges_types[s];
    int end = s + 1 < ranges_types.size() ? ranges_types[s + 1].first : L;
    int device = types[static_cast<size_t>(type)].devices[taken[static_cast<size_t>(type)]++];
    p.stages.push_back({first, end, device});
  }
  return finished(p, "edgepipe", profile, c, options);
}

} // namespace asteroid::planner
