#pragma once

// Small builders shared by the planner tests (not a test source itself).

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "asteroid/planner/asteroid_planner.hpp"
#include "asteroid/planner/cluster.hpp"
#include "asteroid/planner/device_catalog.hpp"
#include "asteroid/planner/error.hpp"
#include "asteroid/planner/exhaustive_planner.hpp"
#include "asteroid/planner/json_io.hpp"
#include "asteroid/planner/model_profile.hpp"

namespace asteroid::planner::test {

/// The paper's environment `env` ("a".."d") at `mbps` (100 or 1000), from
/// examples/clusters/, with speeds relative to `profile`'s device.
inline cluster paper_environment(const std::string& env, int mbps,
                                 const model_profile& profile) {
  return rebase_speeds(load_cluster_file(std::string(ASTEROID_SOURCE_DIR) +
                                         "/examples/clusters/env-" + env + "-" +
                                         std::to_string(mbps) + "mbps.json"),
                       profile);
}

/// A layer whose times are linear in the batch: t(b) = b * per_sample_s.
inline layer_profile linear_layer(std::string name, double fwd_per_sample_s,
                                  double bwd_per_sample_s, int64_t out_bytes,
                                  int64_t param_bytes) {
  layer_profile l;
  l.name = std::move(name);
  l.batch_sizes = {1, 16};
  l.forward_s = {fwd_per_sample_s, 16 * fwd_per_sample_s};
  l.backward_s = {bwd_per_sample_s, 16 * bwd_per_sample_s};
  l.output_bytes_per_sample = out_bytes;
  l.param_bytes = param_bytes;
  l.optimizer_state_bytes = param_bytes;
  return l;
}

inline device_spec device(std::string name, double speed, int64_t memory) {
  device_spec d;
  d.name = std::move(name);
  d.type = "custom";
  d.speed = speed;
  d.memory_bytes = memory;
  return d;
}

/// A random small instance: <= max_layers layers, <= max_devices devices
/// with random speed, memory (sometimes binding) and link matrices.
struct random_instance {
  model_profile profile;
  cluster c;
  int64_t batch = 8;
};

inline random_instance make_random_instance(std::mt19937_64& rng, int max_layers,
                                            int max_devices) {
  auto uni = [&](double a, double b) { return std::uniform_real_distribution<double>(a, b)(rng); };
  auto pick = [&](int a, int b) { return std::uniform_int_distribution<int>(a, b)(rng); };
  random_instance r;
  const int L = pick(2, max_layers);
  const int N = pick(1, max_devices);
  const int64_t batches[] = {4, 8, 12, 16};
  r.batch = batches[pick(0, 3)];
  r.profile.model = "random";
  r.profile.device = "ref";
  r.profile.input_bytes_per_sample = static_cast<int64_t>(uni(1e3, 2e5));
  int64_t fixed_total = 0;
  int64_t stash_total = 0;
  for (int l = 0; l < L; ++l) {
    layer_profile lp;
    lp.name = "layer" + std::to_string(l);
    lp.batch_sizes = {1, 4, 16};
    double per = uni(0.5e-3, 10e-3);
    double overhead = uni(0.0, 1e-3);
    double bwd_ratio = uni(1.5, 2.5);
    for (auto b : lp.batch_sizes) {
      // Slightly sub-linear at larger batches, like real kernels.
      double eff = b >= 16 ? uni(0.85, 1.0) : 1.0;
      lp.forward_s.push_back(overhead + per * static_cast<double>(b) * eff);
      lp.backward_s.push_back(bwd_ratio * (overhead + per * static_cast<double>(b) * eff));
    }
    lp.output_bytes_per_sample = static_cast<int64_t>(uni(1e3, 5e5));
    lp.param_bytes = pick(0, 4) == 0 ? 0 : static_cast<int64_t>(uni(1e4, 3e7));
    lp.optimizer_state_bytes = lp.param_bytes * pick(0, 2);
    lp.stashed_bytes_per_sample = lp.output_bytes_per_sample * pick(1, 4);
    lp.working_bytes_per_sample = static_cast<int64_t>(uni(0.0, 1.0) * lp.output_bytes_per_sample);
    fixed_total += 2 * lp.param_bytes + lp.optimizer_state_bytes;
    stash_total += lp.stashed_bytes_per_sample + lp.working_bytes_per_sample;
    r.profile.layers.push_back(std::move(lp));
  }
  // Budgets around what the whole model needs on one device for the whole
  // batch, so memory binds in some instances and not in others.
  const double whole = static_cast<double>(fixed_total + r.batch * stash_total);
  std::vector<device_spec> devs;
  for (int d = 0; d < N; ++d)
    devs.push_back(device("dev" + std::to_string(d), uni(0.5, 4.0),
                          static_cast<int64_t>(whole * uni(0.15, 1.3))));
  r.c = cluster::uniform("random", devs, 1e8);
  for (int a = 0; a < N; ++a)
    for (int b = 0; b < N; ++b) {
      if (a == b)
        continue;
      r.c.bandwidth_Bps[a][b] = uni(10e6, 1000e6) / 8.0;
      r.c.latency_s[a][b] = pick(0, 1) ? uni(0.0, 2e-3) : 0.0;
    }
  return r;
}

/// The Asteroid planner's and the exhaustive search's plans of one instance;
/// a planner that refused it (planner_error) has none.
struct both_plans {
  std::optional<plan> asteroid, exhaustive;
};

inline both_plans plan_both(const model_profile& profile, const cluster& c, int64_t batch) {
  both_plans out;
  try {
    out.exhaustive = exhaustive_planner{}.make_plan(profile, c, batch);
  } catch (const planner_error&) {
  }
  try {
    out.asteroid = asteroid_planner{}.make_plan(profile, c, batch);
  } catch (const planner_error&) {
  }
  return out;
}

} // namespace asteroid::planner::test
