#include "asteroid/planner/cost_model.hpp"

#include <algorithm>
#include <limits>

#include "asteroid/planner/error.hpp"
#include "asteroid/planner/json_io.hpp"
#include "asteroid/planner/plan_validation.hpp"
#include "asteroid/planner/schedule.hpp"
#include "asteroid/planner/simulator.hpp"

namespace asteroid::planner {

cost_tables::cost_tables(const model_profile& profile, int64_t max_share)
    : num_layers_(profile.num_layers()), max_share_(std::max<int64_t>(max_share, 0)),
      profile_(&profile) {
  const int L = num_layers_;
  const auto W = static_cast<size_t>(L + 1);
  fwd_.assign(static_cast<size_t>(max_share_ + 1) * W, 0.0);
  bwd_.assign(static_cast<size_t>(max_share_ + 1) * W, 0.0);
  for (int64_t y = 1; y <= max_share_; ++y) {
    auto* f = &fwd_[static_cast<size_t>(y) * W];
    auto* b = &bwd_[static_cast<size_t>(y) * W];
    for (int l = 0; l < L; ++l) {
      f[l + 1] = f[l] + profile.layers[l].forward_time(static_cast<double>(y));
      b[l + 1] = b[l] + profile.layers[l].backward_time(static_cast<double>(y));
    }
  }
  param_prefix_.assign(W, 0);
  fixed_prefix_.assign(W, 0);
  snapshot_prefix_.assign(W, 0);
  stash_prefix_.assign(W, 0);
  optimizer_step_prefix_.assign(W, 0.0);
  boundary_.assign(W, 0);
  boundary_[0] = profile.input_bytes_per_sample;
  for (int l = 0; l < L; ++l) {
    const auto& lp = profile.layers[l];
    param_prefix_[l + 1] = param_prefix_[l] + lp.param_bytes;
    // Weights, their gradients and the optimizer state stay for the round.
    fixed_prefix_[l + 1] = fixed_prefix_[l] + 2 * lp.param_bytes + lp.optimizer_state_bytes;
    snapshot_prefix_[l + 1] = snapshot_prefix_[l] + lp.param_bytes + lp.optimizer_state_bytes;
    stash_prefix_[l + 1] = stash_prefix_[l] + lp.stash_bytes_per_sample();
    optimizer_step_prefix_[l + 1] = optimizer_step_prefix_[l] + lp.optimizer_step_s;
    boundary_[l + 1] = lp.output_bytes_per_sample;
  }
  working_max_.assign(static_cast<size_t>(L) * L, 0);
  for (int a = 0; a < L; ++a) {
    int64_t m = 0;
    for (int e = a; e < L; ++e) {
      m = std::max(m, profile.layers[e].working_bytes_per_sample);
      working_max_[static_cast<size_t>(a) * L + e] = m;
    }
  }
}

double cost_tables::forward_s(int first, int end, int64_t y) const {
  if (y <= 0)
    return 0.0;
  if (y <= max_share_) {
    const auto* f = &fwd_[static_cast<size_t>(y) * (num_layers_ + 1)];
    return f[end] - f[first];
  }
  double t = 0.0;
  for (int l = first; l < end; ++l)
    t += profile_->layers[l].forward_time(static_cast<double>(y));
  return t;
}

double cost_tables::backward_s(int first, int end, int64_t y) const {
  if (y <= 0)
    return 0.0;
  if (y <= max_share_) {
    const auto* b = &bwd_[static_cast<size_t>(y) * (num_layers_ + 1)];
    return b[end] - b[first];
  }
  double t = 0.0;
  for (int l = first; l < end; ++l)
    t += profile_->layers[l].backward_time(static_cast<double>(y));
  return t;
}

int64_t cost_tables::param_bytes(int first, int end) const {
  return param_prefix_[end] - param_prefix_[first];
}

double cost_tables::update_s(int first, int end) const {
  return optimizer_step_prefix_[end] - optimizer_step_prefix_[first];
}

int64_t cost_tables::fixed_bytes(int first, int end) const {
  return fixed_prefix_[end] - fixed_prefix_[first];
}

int64_t cost_tables::snapshot_bytes(int first, int end) const {
  return snapshot_prefix_[end] - snapshot_prefix_[first];
}

int64_t cost_tables::activation_bytes_per_sample(int first, int end) const {
  return boundary_[first] + stash_prefix_[end] - stash_prefix_[first];
}

int64_t cost_tables::working_bytes_per_sample(int first, int end) const {
  if (end <= first)
    return 0;
  return working_max_[static_cast<size_t>(first) * num_layers_ + (end - 1)];
}

int64_t cost_tables::boundary_bytes_per_sample(int layer) const {
  return boundary_[layer];
}

int64_t cost_tables::memory_bytes(int first, int end, int64_t y, int in_flight) const {
  const int64_t during_step =
    y * (static_cast<int64_t>(in_flight) * activation_bytes_per_sample(first, end) +
         working_bytes_per_sample(first, end));
  const int64_t between_steps = profile_->state_snapshots ? snapshot_bytes(first, end) : 0;
  return fixed_bytes(first, end) + std::max(during_step, between_steps);
}

int64_t cost_tables::max_share_within(int first, int end, int in_flight, int64_t budget,
                                      int64_t limit) const {
  int64_t room = budget - fixed_bytes(first, end);
  if (room < 0 || (profile_->state_snapshots && room < snapshot_bytes(first, end)))
    return -1;
  int64_t per_sample = static_cast<int64_t>(in_flight) * activation_bytes_per_sample(first, end) +
                       working_bytes_per_sample(first, end);
  if (per_sample <= 0)
    return limit;
  return std::min(limit, room / per_sample);
}

int in_flight_micro_batches(int stage, int num_stages, int micro_batches) {
  return std::max(1, std::min(num_stages - stage, micro_batches));
}

double transfer_s(const cluster& c, const std::vector<int>& from, const std::vector<int>& to,
                  double bytes, traffic what) {
  if (bytes <= 0.0)
    return 0.0;
  double bw = std::numeric_limits<double>::infinity();
  double lat = 0.0;
  for (int a : from)
    for (int b : to) {
      if (a == b)
        continue;
      bw = std::min(bw, c.payload_rate(a, b, what));
      lat = std::max(lat, c.latency(a, b));
    }
  if (bw == std::numeric_limits<double>::infinity())
    return 0.0;
  return bytes / bw + lat;
}

double pieces_transfer_s(const cluster& c, const std::vector<int>& from,
                         const std::vector<int64_t>& from_shares, const std::vector<int>& to,
                         const std::vector<int64_t>& to_shares, double bytes_per_sample,
                         traffic what) {
  if (bytes_per_sample <= 0.0)
    return 0.0;
  double slowest = 0.0;
  int64_t from_begin = 0;
  for (size_t i = 0; i < from.size(); ++i) {
    const int64_t from_end = from_begin + from_shares[i];
    int64_t to_begin = 0;
    for (size_t j = 0; j < to.size(); ++j) {
      const int64_t to_end = to_begin + to_shares[j];
      const int64_t rows = std::min(from_end, to_end) - std::max(from_begin, to_begin);
      if (rows > 0 && from[i] != to[j])
        slowest = std::max(slowest, bytes_per_sample * static_cast<double>(rows)
                                        / c.payload_rate(from[i], to[j], what)
                                      + c.latency(from[i], to[j]));
      to_begin = to_end;
    }
    from_begin = from_end;
  }
  return slowest;
}

double allreduce_s(const cluster& c, const std::vector<int>& group, double bytes) {
  auto g = group.size();
  if (g <= 1 || bytes <= 0.0)
    return 0.0;
  double bw = std::numeric_limits<double>::infinity();
  double lat = 0.0;
  for (int a : group)
    for (int b : group) {
      if (a == b)
        continue;
      bw = std::min(bw, c.bandwidth(a, b));
      lat = std::max(lat, c.latency(a, b));
    }
  double steps = 2.0 * static_cast<double>(g - 1);
  // The ring is compressed as a whole when its slowest link is: every
  // replica must round the reduced chunks alike.
  return steps / static_cast<double>(g) * bytes * c.wire_ratio_at(bw, traffic::all_reduce) / bw
         + steps * lat;
}

double update_s(const cost_tables& tables, const cluster& c, int first, int end,
                const std::vector<int>& group) {
  double slowest = std::numeric_limits<double>::infinity();
  for (int d : group)
    slowest = std::min(slowest, c.devices[d].speed);
  if (group.empty() || !(slowest > 0.0))
    return 0.0;
  return tables.update_s(first, end) / slowest;
}

double co_located_slowdown(const plan& p, const cluster& c) {
  return p.num_devices() > 1 ? c.co_location_slowdown : 1.0;
}

pipeline_steps make_steps(const plan& p, const cost_tables& t, const cluster& c,
                          boundary_pricing links) {
  pipeline_steps out;
  out.micro_batches = p.micro_batches;
  out.full_duplex_links = c.full_duplex_links;
  const auto P = p.num_stages();
  const double micro = static_cast<double>(p.micro_batch_size());
  const double slowdown = co_located_slowdown(p, c);
  for (int s = 0; s < P; ++s) {
    const auto& st = p.stages[s];
    pipeline_step step;
    step.type = pipeline_step::kind::compute;
    step.stage = s;
    step.devices = st.devices;
    for (size_t i = 0; i < st.devices.size(); ++i) {
      double speed = c.devices[st.devices[i]].speed / slowdown;
      double f = t.forward_s(st.first_layer, st.end_layer, st.shares[i]) / speed;
      double b = t.backward_s(st.first_layer, st.end_layer, st.shares[i]) / speed;
      step.device_forward_s.push_back(f);
      step.device_backward_s.push_back(b);
      step.forward_s = std::max(step.forward_s, f);
      step.backward_s = std::max(step.backward_s, b);
    }
    step.allreduce_s =
      allreduce_s(c, st.devices, static_cast<double>(t.param_bytes(st.first_layer, st.end_layer)));
    const double update = t.update_s(st.first_layer, st.end_layer);
    for (int d : st.devices) {
      step.device_update_s.push_back(update / (c.devices[d].speed / slowdown));
      step.update_s = std::max(step.update_s, step.device_update_s.back());
    }
    out.steps.push_back(std::move(step));
    if (s + 1 < P) {
      const auto& next = p.stages[s + 1];
      pipeline_step comm;
      comm.type = pipeline_step::kind::communication;
      comm.stage = s;
      const double per_sample = static_cast<double>(t.boundary_bytes_per_sample(st.end_layer));
      if (links == boundary_pricing::pieces) {
        comm.forward_s = pieces_transfer_s(c, st.devices, st.shares, next.devices, next.shares,
                                           per_sample, traffic::activations);
        comm.backward_s = pieces_transfer_s(c, next.devices, next.shares, st.devices, st.shares,
                                            per_sample, traffic::gradients);
      } else {
        comm.forward_s =
          transfer_s(c, st.devices, next.devices, per_sample * micro, traffic::activations);
        comm.backward_s =
          transfer_s(c, next.devices, st.devices, per_sample * micro, traffic::gradients);
      }
      out.steps.push_back(std::move(comm));
    }
  }
  return out;
}

pipeline_steps make_steps(const plan& p, const model_profile& profile, const cluster& c,
                          boundary_pricing links) {
  validate(p, profile.num_layers(), c);
  cost_tables t(profile, p.micro_batch_size());
  return make_steps(p, t, c, links);
}

double round_latency(const double* f, const double* b, const double* a, int S, int M,
                     bool full_duplex_links) {
  if (S <= 0)
    return 0.0;
  double sfb = 0.0;
  double pi = 0.0; // max(D, window cycles)
  double z = -std::numeric_limits<double>::infinity();
  double bpre = 0.0;
  for (int k = 0; k < S; ++k) {
    const double e = f[k] + b[k];
    sfb += e;
    // A trip takes both directions; a full-duplex link is busy with the
    // larger of them per micro-batch (odd steps are links).
    pi = std::max(pi, full_duplex_links && k % 2 == 1 ? std::max(f[k], b[k]) : e);
    z = std::max(z, a[k] - bpre);
    bpre += b[k];
  }
  // Window cycles: stages s..t (steps 2s..2t), k = t-s+1 micro-batches.
  const int P = (S + 1) / 2;
  for (int s = 0; s < P; ++s) {
    double run = f[2 * s] + b[2 * s];
    for (int t = s + 1; t < P && t - s + 1 <= M; ++t) {
      run += f[2 * t - 1] + b[2 * t - 1] + f[2 * t] + b[2 * t];
      pi = std::max(pi, run / (t - s + 1));
    }
  }
  return sfb + (M - 1) * pi + z;
}

double round_latency(const pipeline_steps& ps) {
  const auto& st = ps.steps;
  const int S = static_cast<int>(st.size());
  std::vector<double> f(S), b(S), a(S);
  for (int k = 0; k < S; ++k) {
    f[k] = st[k].forward_s;
    b[k] = st[k].backward_s;
    a[k] = st[k].end_of_round_s();
  }
  return round_latency(f.data(), b.data(), a.data(), S, ps.micro_batches,
                       ps.full_duplex_links);
}

pipeline_summary pipeline_summary::stage(double f, double b, double a, int micro_batches) {
  pipeline_summary r;
  r.micro_batches = std::max(1, micro_batches);
  r.stages = 1;
  r.D = f + b;
  r.Pi = f + b;
  r.Z = a;
  r.SFB = f + b;
  r.U[0] = f + b;
  return r;
}

pipeline_summary pipeline_summary::prepend(double f, double b, double a, double cf,
                                           double cb, bool full_duplex_links) const {
  pipeline_summary r;
  r.micro_batches = micro_batches;
  r.stages = stages + 1;
  const double h = f + b;
  const double c = cf + cb;
  const double link_busy = full_duplex_links ? std::max(cf, cb) : c;
  r.D = std::max({D, h, link_busy});
  r.SFB = SFB + h + c;
  // The link step has no all-reduce: T_a = 0 behind the new stage's E_b.
  r.Z = std::max({a, -b, Z - b - cb});
  // Window cycles that start at the new stage: it, the link and the first
  // t old stages, t + 1 <= M micro-batches.
  double pi = std::max({Pi, h, link_busy});
  // Only runs of at most M stages (and max_window) can ever form a cycle,
  // so U is kept that far.
  const int known = std::min({stages, max_window - 1, micro_batches - 1});
  r.U[0] = h;
  for (int t = 1; t <= known; ++t) {
    r.U[t] = h + c + U[t - 1];
    pi = std::max(pi, r.U[t] / (t + 1));
  }
  r.Pi = pi;
  return r;
}

std::vector<int64_t> memory_per_device(const plan& p, const cost_tables& t, const cluster& c) {
  std::vector<int64_t> mem(c.devices.size(), 0);
  const int P = p.num_stages();
  for (int s = 0; s < P; ++s) {
    const auto& st = p.stages[s];
    int k = in_flight_micro_batches(s, P, p.micro_batches);
    for (size_t i = 0; i < st.devices.size(); ++i)
      mem[st.devices[i]] = t.memory_bytes(st.first_layer, st.end_layer, st.shares[i], k);
  }
  return mem;
}

void evaluate(plan& p, const cost_tables& t, const cluster& c) {
  validate(p, t.num_layers(), c);
  auto steps = make_steps(p, t, c);
  const auto rate = [&](double round_s) {
    return round_s > 0.0 ? static_cast<double>(p.batch_size) / round_s : 0.0;
  };
  p.predicted_round_s = round_latency(steps);
  p.predicted_samples_per_s = rate(p.predicted_round_s);
  simulator_options sim;
  sim.links = c.full_duplex_links ? link_model::full_duplex : link_model::half_duplex;
  sim.record_events = false;
  p.simulated_round_s =
    simulate(p, make_steps(p, t, c, boundary_pricing::pieces), schedule_kind::one_f_one_b, sim)
      .round_s;
  p.simulated_samples_per_s = rate(p.simulated_round_s);
  p.predicted_memory_bytes = memory_per_device(p, t, c);
}

void evaluate(plan& p, const model_profile& profile, const cluster& c) {
  cost_tables t(profile, p.micro_batch_size());
  evaluate(p, t, c);
}

bool fits_memory(const plan& p, const cluster& c) {
  for (size_t d = 0; d < p.predicted_memory_bytes.size() && d < c.devices.size(); ++d)
    if (p.predicted_memory_bytes[d] > c.devices[d].memory_bytes)
      return false;
  return true;
}

void check_memory(const plan& p, const cluster& c) {
  for (size_t d = 0; d < p.predicted_memory_bytes.size() && d < c.devices.size(); ++d) {
    auto need = p.predicted_memory_bytes[d];
    auto have = c.devices[d].memory_bytes;
    if (need > have)
      throw planner_error("plan (" + p.planner + "): device " + std::to_string(d) + " (" +
                          c.devices[d].name + ") needs " + format_bytes(need) + " but has " +
                          format_bytes(have) + " (short by " + std::to_string(need - have) +
                          " bytes)");
  }
}

} // namespace asteroid::planner
