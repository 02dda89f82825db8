#include "asteroid/planner/baselines.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <numeric>

#include "asteroid/planner/allocation.hpp"
#include "asteroid/planner/cost_model.hpp"
#include "asteroid/planner/error.hpp"
#include "asteroid/planner/json_io.hpp"

namespace asteroid::planner {

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();

void check_inputs(const std::string& who, const model_profile& profile, const cluster& c,
                  int64_t batch) {
  if (batch <= 0)
    throw planner_error(who + ": batch size must be positive, got " + std::to_string(batch));
  if (profile.num_layers() == 0)
    throw planner_error(who + ": profile of " + profile.model + " has no layers");
  if (c.size() == 0)
    throw planner_error(who + ": cluster " + c.name + " has no devices");
}

// Keeps the fastest candidate that fits; remembers the smallest memory
// overshoot of the others to explain an infeasible result.
struct best_keeper {
  explicit best_keeper(std::string w) : who(std::move(w)) {}
  std::string who;
  plan best;
  bool found = false;
  int tight_device = -1;
  int64_t shortfall = std::numeric_limits<int64_t>::max();

  void offer(plan p, const cost_tables& t, const cluster& c) {
    p.planner = who;
    evaluate(p, t, c);
    int worst = -1;
    int64_t over = 0;
    for (int d = 0; d < c.size(); ++d) {
      auto o = p.predicted_memory_bytes[d] - c.devices[d].memory_bytes;
      if (o > over) {
        over = o;
        worst = d;
      }
    }
    if (worst >= 0) {
      if (over < shortfall) {
        shortfall = over;
        tight_device = worst;
      }
      return;
    }
    if (!found || p.predicted_round_s < best.predicted_round_s) {
      best = std::move(p);
      found = true;
    }
  }

  plan result(const cluster& c, const std::string& why = {}) {
    if (found)
      return std::move(best);
    std::string msg = who + ": infeasible: no plan fits memory";
    if (tight_device >= 0)
      msg += "; closest: device " + c.devices[tight_device].name + " short by " +
             std::to_string(shortfall) + " bytes";
    if (!why.empty())
      msg += " (" + why + ")";
    throw planner_error(msg);
  }
};

// Contiguous partition of per-layer costs w into k parts minimising the
// largest part (k <= w.size()): returns the k+1 boundaries.
std::vector<int> balanced_partition(const std::vector<double>& w, int k) {
  const int L = static_cast<int>(w.size());
  std::vector<double> pre(L + 1, 0.0);
  for (int l = 0; l < L; ++l)
    pre[l + 1] = pre[l] + w[l];
  // best[s][j]: min max part splitting the first j layers into s parts.
  std::vector<std::vector<double>> best(k + 1, std::vector<double>(L + 1, inf));
  std::vector<std::vector<int>> cut(k + 1, std::vector<int>(L + 1, 0));
  best[0][0] = 0.0;
  for (int s = 1; s <= k; ++s)
    for (int j = s; j <= L; ++j)
      for (int i = s - 1; i < j; ++i) {
        double v = std::max(best[s - 1][i], pre[j] - pre[i]);
        if (v < best[s][j]) {
          best[s][j] = v;
          cut[s][j] = i;
        }
      }
  std::vector<int> b(k + 1);
  b[k] = L;
  for (int s = k; s >= 1; --s)
    b[s - 1] = cut[s][b[s]];
  return b;
}

double min_link(const cluster& c) {
  double bw = inf;
  for (int a = 0; a < c.size(); ++a)
    for (int b = 0; b < c.size(); ++b)
      if (a != b)
        bw = std::min(bw, c.bandwidth(a, b));
  return bw;
}

// A pipeline with one device per stage (device s runs stage s) whose stage
// s covers layers [boundaries[s], boundaries[s + 1]).
plan chain_plan(int64_t batch, int micro_batches,
                const std::vector<int>& boundaries) {
  plan p;
  p.batch_size = batch;
  p.micro_batches = micro_batches;
  for (size_t s = 0; s + 1 < boundaries.size(); ++s)
    p.stages.push_back({boundaries[s], boundaries[s + 1],
                        {static_cast<int>(s)},
                        {batch / micro_batches}});
  return p;
}

} // namespace

plan on_device_planner::make_plan(const model_profile& profile, const cluster& c,
                                  int64_t batch) {
  check_inputs(name(), profile, c, batch);
  cost_tables t(profile, batch);
  best_keeper keep(name());
  const int L = profile.num_layers();
  for (int M : micro_batch_candidates(batch))
    for (int d = 0; d < c.size(); ++d) {
      plan p;
      p.batch_size = batch;
      p.micro_batches = M;
      p.stages.push_back({0, L, {d}, {batch / M}});
      keep.offer(std::move(p), t, c);
    }
  return keep.result(c, "the whole model does not fit on any single device");
}

plan data_parallel_planner::make_plan(const model_profile& profile, const cluster& c,
                                      int64_t batch) {
  check_inputs(name(), profile, c, batch);
  cost_tables t(profile, batch);
  best_keeper keep(name());
  const int L = profile.num_layers();
  const int n = c.size();
  std::vector<int> all(n);
  std::iota(all.begin(), all.end(), 0);
  for (int M : micro_batch_candidates(batch)) {
    const int64_t micro = batch / M;
    // Data parallelism runs on every device: a micro-batch with fewer
    // samples than devices would leave some idle (and the rest would be
    // data parallelism on fewer devices, or on-device training at M = B).
    if (micro < n)
      continue;
    plan p;
    p.batch_size = batch;
    p.micro_batches = M;
    stage_plan st{0, L, {}, {}};
    if (proportional_) {
      auto a = allocate_stage(t, c, 0, L, all, micro, 1);
      if (!a.feasible) {
        if (a.tightest >= 0 && a.shortfall_bytes < keep.shortfall) {
          keep.shortfall = a.shortfall_bytes;
          keep.tight_device = a.tightest;
        }
        continue;
      }
      // A device Algorithm 1 gives no sample (even one would make it the
      // group's straggler) stays out of the group.
      for (int d = 0; d < n; ++d)
        if (a.shares[d] > 0) {
          st.devices.push_back(all[d]);
          st.shares.push_back(a.shares[d]);
        }
    } else {
      st.devices = all;
      st.shares.assign(n, micro / n);
      for (int64_t k = 0; k < micro % n; ++k)
        ++st.shares[k];
    }
    p.stages.push_back(std::move(st));
    keep.offer(std::move(p), t, c);
  }
  if (batch < n)
    throw planner_error(name() + ": infeasible: batch size " + std::to_string(batch) +
                        " is smaller than the " + std::to_string(n) +
                        " devices (every device computes part of every micro-batch)");
  return keep.result(c, "every device holds the whole model");
}

plan gpipe_planner::make_plan(const model_profile& profile, const cluster& c, int64_t batch) {
  check_inputs(name(), profile, c, batch);
  cost_tables t(profile, batch);
  best_keeper keep(name());
  const int L = profile.num_layers();
  const int P = std::min(L, c.size());
  for (int M : micro_batch_candidates(batch)) {
    const int64_t micro = batch / M;
    std::vector<double> w(L);
    for (int l = 0; l < L; ++l)
      w[l] = t.forward_s(l, l + 1, micro) + t.backward_s(l, l + 1, micro);
    auto b = balanced_partition(w, P);
    keep.offer(chain_plan(batch, M, b), t, c);
  }
  return keep.result(c, "time-balanced stages, one device each");
}

plan pipedream_planner::make_plan(const model_profile& profile, const cluster& c,
                                  int64_t batch) {
  check_inputs(name(), profile, c, batch);
  cost_tables t(profile, batch);
  best_keeper keep(name());
  const int L = profile.num_layers();
  const int N = c.size();
  double mean_speed = 0.0;
  for (const auto& d : c.devices)
    mean_speed += d.speed / N;
  const double B = N > 1 ? min_link(c) : inf;
  for (int M : micro_batch_candidates(batch)) {
    const int64_t micro = batch / M;
    // A[j][m]: best slowest-stage time for the first j layers on m machines.
    // A stage has at most as many replicas as a micro-batch has samples:
    // here replicas split each micro-batch (PipeDream hands them whole
    // micro-batches in turn), and a replica without samples would not
    // compute at all.
    const int max_replicas = static_cast<int>(std::min<int64_t>(N, micro));
    std::vector<std::vector<double>> A(L + 1, std::vector<double>(N + 1, inf));
    std::vector<std::vector<std::pair<int, int>>> from(
      L + 1, std::vector<std::pair<int, int>>(N + 1, {-1, -1}));
    auto stage_time = [&](int i, int j, int m) {
      double T = (t.forward_s(i, j, micro) + t.backward_s(i, j, micro)) / mean_speed;
      double W = static_cast<double>(t.param_bytes(i, j)) * c.wire_ratio_at(B, traffic::all_reduce);
      double sync = m > 1 ? 4.0 * (m - 1) * W / (B * m) : 0.0;
      return (T + sync) / m;
    };
    for (int j = 1; j <= L; ++j)
      for (int m = 1; m <= N; ++m) {
        if (m <= max_replicas) {
          A[j][m] = stage_time(0, j, m);
          from[j][m] = {0, 0};
        }
        for (int i = 1; i < j; ++i)
          for (int mp = 1; mp < m && mp <= max_replicas; ++mp) {
            if (A[i][m - mp] == inf)
              continue;
            // PipeDream's optimizer: the activations into a stage of mp
            // replicas (and the gradients back) take 2 a / (B mp), each
            // replica receiving its part over its own link.
            double comm = (c.wire_ratio_at(B, traffic::activations)
                           + c.wire_ratio_at(B, traffic::gradients))
                          * static_cast<double>(t.boundary_bytes_per_sample(i))
                          * static_cast<double>(micro) / (B * mp);
            double v = std::max({A[i][m - mp], comm, stage_time(i, j, mp)});
            if (v < A[j][m]) {
              A[j][m] = v;
              from[j][m] = {i, m - mp};
            }
          }
      }
    // PipeDream uses every machine; when the micro-batch is too small for
    // that (more machines than stages x samples), as many as it can.
    int m = N;
    while (m > 0 && A[L][m] == inf)
      --m;
    if (m == 0)
      continue;
    // Walk back the chosen stages.
    std::vector<std::pair<int, int>> stages; // (first layer, replicas)
    int j = L;
    while (j > 0) {
      auto [i, mrest] = from[j][m];
      stages.push_back({i, m - mrest});
      j = i;
      m = mrest;
    }
    std::reverse(stages.begin(), stages.end());
    plan p;
    p.batch_size = batch;
    p.micro_batches = M;
    int dev = 0;
    for (size_t s = 0; s < stages.size(); ++s) {
      stage_plan st;
      st.first_layer = stages[s].first;
      st.end_layer = s + 1 < stages.size() ? stages[s + 1].first : L;
      int g = stages[s].second;
      for (int k = 0; k < g; ++k)
        st.devices.push_back(dev++);
      // Round-robin dispatch: equal shares.
      st.shares.assign(g, micro / g);
      for (int64_t k = 0; k < micro % g; ++k)
        ++st.shares[k];
      p.stages.push_back(std::move(st));
    }
    keep.offer(std::move(p), t, c);
  }
  return keep.result(c, "homogeneous plan, memory not considered by PipeDream");
}

plan ftpipehd_planner::make_plan(const model_profile& profile, const cluster& c,
                                 int64_t batch) {
  check_inputs(name(), profile, c, batch);
  cost_tables t(profile, batch);
  best_keeper keep(name());
  const int L = profile.num_layers();
  const int S = std::min(L, c.size());
  for (int M : micro_batch_candidates(batch)) {
    const int64_t micro = batch / M;
    // dp[s][j]: slowest of the first s stages (devices 0..s-1) covering
    // layers [0, j); the memory check is our addition.
    std::vector<std::vector<double>> dp(S + 1, std::vector<double>(L + 1, inf));
    std::vector<std::vector<int>> cut(S + 1, std::vector<int>(L + 1, -1));
    dp[0][0] = 0.0;
    for (int s = 1; s <= S; ++s) {
      const auto& d = c.devices[s - 1];
      int K = in_flight_micro_batches(s - 1, S, M);
      for (int j = s; j <= L - (S - s); ++j)
        for (int i = s - 1; i < j; ++i) {
          if (dp[s - 1][i] == inf)
            continue;
          if (t.memory_bytes(i, j, micro, K) > d.memory_bytes)
            continue;
          double comp = (t.forward_s(i, j, micro) + t.backward_s(i, j, micro)) / d.speed;
          double comm = 0.0;
          if (s > 1)
            comm = (c.wire_ratio(s - 2, s - 1, traffic::activations)
                    + c.wire_ratio(s - 2, s - 1, traffic::gradients))
                   * static_cast<double>(t.boundary_bytes_per_sample(i))
                   * static_cast<double>(micro) / c.bandwidth(s - 2, s - 1);
          double v = std::max({dp[s - 1][i], comm, comp});
          if (v < dp[s][j]) {
            dp[s][j] = v;
            cut[s][j] = i;
          }
        }
    }
    if (dp[S][L] == inf)
      continue;
    std::vector<int> b(S + 1);
    b[S] = L;
    for (int s = S; s >= 1; --s)
      b[s - 1] = cut[s][b[s]];
    keep.offer(chain_plan(batch, M, b), t, c);
  }
  return keep.result(c, "one device per stage in cluster order");
}

plan pipeedge_planner::make_plan(const model_profile& profile, const cluster& c,
                                 int64_t batch) {
  check_inputs(name(), profile, c, batch);
  cost_tables t(profile, batch);
  best_keeper keep(name());
  const int L = profile.num_layers();
  // Device types: equal type, speed and budget.
  std::vector<std::vector<int>> members;
  std::map<std::tuple<std::string, double, int64_t>, int> type_of;
  for (int d = 0; d < c.size(); ++d) {
    auto key = std::make_tuple(c.devices[d].type, c.devices[d].speed, c.devices[d].memory_bytes);
    auto it = type_of.find(key);
    if (it == type_of.end()) {
      it = type_of.emplace(key, static_cast<int>(members.size())).first;
      members.emplace_back();
    }
    members[it->second].push_back(d);
  }
  const int K = static_cast<int>(members.size());
  std::vector<int64_t> radix(K + 1, 1);
  for (int k = 0; k < K; ++k) {
    radix[k + 1] = radix[k] * static_cast<int64_t>(members[k].size() + 1);
    if (radix[k + 1] > (int64_t{1} << 22))
      throw planner_error("pipeedge: too many device types (" + std::to_string(K) +
                          ") for its multiset DP");
  }
  const int64_t S = radix[K];
  // Slowest link between any two devices of types a and b.
  std::vector<double> type_bw(static_cast<size_t>(K) * K, inf);
  for (int a = 0; a < K; ++a)
    for (int b = 0; b < K; ++b)
      for (int x : members[a])
        for (int y : members[b])
          if (x != y)
            type_bw[a * K + b] =
              std::min({type_bw[a * K + b], c.bandwidth(x, y), c.bandwidth(y, x)});
  auto count = [&](int64_t set, int k) { return (set / radix[k]) % (members[k].size() + 1); };
  for (int M : micro_batch_candidates(batch)) {
    const int64_t micro = batch / M;
    // Suffix DP: h[l][set][k] = slowest stage of layers [l, L) on the devices
    // counted in `set`, whose first stage runs on a device of type k.
    const size_t cells = static_cast<size_t>(L + 1) * S * K;
    std::vector<double> h(cells, inf);
    std::vector<int> nxt(cells, -1);
    auto at = [&](int l, int64_t set, int k) {
      return (static_cast<size_t>(l) * S + set) * K + k;
    };
    std::vector<int> stages_in(S, 0);
    for (int64_t set = 0; set < S; ++set)
      for (int k = 0; k < K; ++k)
        stages_in[set] += static_cast<int>(count(set, k));
    for (int l = L - 1; l >= 0; --l)
      for (int64_t set = 1; set < S; ++set)
        for (int k = 0; k < K; ++k) {
          if (count(set, k) == 0)
            continue;
          const auto& dev = c.devices[members[k][0]];
          int64_t rest = set - radix[k];
          int in_flight = std::min(stages_in[set], M);
          for (int l2 = l + 1; l2 <= L; ++l2) {
            if (t.memory_bytes(l, l2, micro, in_flight) > dev.memory_bytes)
              break;
            double comp = (t.forward_s(l, l2, micro) + t.backward_s(l, l2, micro)) / dev.speed;
            if (l2 == L) {
              if (rest == 0 && comp < h[at(l, set, k)]) {
                h[at(l, set, k)] = comp;
                nxt[at(l, set, k)] = L * K; // end marker
              }
              continue;
            }
            for (int k2 = 0; k2 < K; ++k2) {
              double sub = h[at(l2, rest, k2)];
              if (sub == inf)
                continue;
              double comm = c.wire_ratio_at(type_bw[k * K + k2], traffic::activations)
                            * static_cast<double>(t.boundary_bytes_per_sample(l2))
                            * static_cast<double>(micro) / type_bw[k * K + k2];
              double v = std::max({comp, comm, sub});
              if (v < h[at(l, set, k)]) {
                h[at(l, set, k)] = v;
                nxt[at(l, set, k)] = l2 * K + k2;
              }
            }
          }
        }
    double best = inf;
    int64_t bset = 0;
    int bk = -1;
    for (int64_t set = 1; set < S; ++set)
      for (int k = 0; k < K; ++k)
        if (h[at(0, set, k)] < best) {
          best = h[at(0, set, k)];
          bset = set;
          bk = k;
        }
    if (bk < 0)
      continue;
    plan p;
    p.batch_size = batch;
    p.micro_batches = M;
    std::vector<size_t> used(K, 0);
    int l = 0;
    int64_t set = bset;
    int k = bk;
    while (l < L) {
      int code = nxt[at(l, set, k)];
      int l2 = code / K;
      int k2 = code % K;
      p.stages.push_back({l, l2, {members[k][used[k]++]}, {micro}});
      set -= radix[k];
      l = l2;
      k = k2;
    }
    keep.offer(std::move(p), t, c);
  }
  return keep.result(c, "one device per stage");
}

} // namespace asteroid::planner
