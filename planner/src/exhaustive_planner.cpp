#include "asteroid/planner/exhaustive_planner.hpp"

#include <algorithm>
#include <limits>

#include "asteroid/planner/allocation.hpp"
#include "asteroid/planner/co_location.hpp"
#include "asteroid/planner/cost_model.hpp"
#include "asteroid/planner/error.hpp"

namespace asteroid::planner {

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();

// Number of maps from n devices to {idle, 0..P-1} hitting every stage.
int64_t count_labelings(int n, int P) {
  // inclusion-exclusion over stages left empty: sum_k (-1)^k C(P,k) (P+1-k)^n
  int64_t total = 0;
  int64_t binom = 1;
  for (int k = 0; k <= P; ++k) {
    int64_t pw = 1;
    for (int i = 0; i < n; ++i)
      pw *= (P + 1 - k);
    total += (k % 2 ? -1 : 1) * binom * pw;
    binom = binom * (P - k) / (k + 1);
  }
  return total;
}

int64_t binomial(int n, int k) {
  if (k < 0 || k > n)
    return 0;
  int64_t r = 1;
  for (int i = 1; i <= k; ++i)
    r = r * (n - k + i) / i;
  return r;
}

} // namespace

plan exhaustive_planner::make_plan(const model_profile& profile, const cluster& c,
                                   int64_t batch) {
  return plan_co_located(profile, c, batch, name(), [&](const cluster& shared) {
    return search(profile, shared, batch);
  });
}

plan exhaustive_planner::search(const model_profile& profile, const cluster& c,
                                int64_t batch) {
  if (batch <= 0)
    throw planner_error("exhaustive: batch size must be positive");
  const int L = profile.num_layers();
  const int N = c.size();
  if (L == 0 || N == 0)
    throw planner_error("exhaustive: empty model or cluster");
  if (N > 16)
    throw planner_error("exhaustive: " + std::to_string(N) + " devices is too many (max 16)");
  auto Ms = micro_batch_candidates(batch);
  const int Pmax = std::min(L, N);
  int64_t work = 0;
  for (int P = 1; P <= Pmax; ++P)
    work += count_labelings(N, P) * binomial(L - 1, P - 1);
  work *= static_cast<int64_t>(Ms.size());
  if (work > max_evaluations_)
    throw planner_error("exhaustive: " + std::to_string(work) +
                        " plans to evaluate exceed the limit of " +
                        std::to_string(max_evaluations_));
  cost_tables t(profile, batch);
  const int masks = 1 << N;
  auto devices_of = [&](int mask) {
    std::vector<int> d;
    for (int k = 0; k < N; ++k)
      if (mask >> k & 1)
        d.push_back(k);
    return d;
  };
  std::vector<std::vector<int>> group(masks);
  for (int m = 1; m < masks; ++m)
    group[m] = devices_of(m);
  // Slowest payload rate (cluster::payload_rate) of activations and of
  // gradients / largest latency from group a to group b.
  std::vector<double> cross_act(static_cast<size_t>(masks) * masks, inf);
  std::vector<double> cross_grad(static_cast<size_t>(masks) * masks, inf);
  std::vector<double> cross_lat(static_cast<size_t>(masks) * masks, 0.0);
  for (int a = 1; a < masks; ++a)
    for (int b = 1; b < masks; ++b) {
      if (a & b)
        continue;
      double act = inf, grad = inf, lat = 0.0;
      for (int x : group[a])
        for (int y : group[b]) {
          act = std::min(act, c.payload_rate(x, y, traffic::activations));
          grad = std::min(grad, c.payload_rate(x, y, traffic::gradients));
          lat = std::max(lat, c.latency(x, y));
        }
      cross_act[static_cast<size_t>(a) * masks + b] = act;
      cross_grad[static_cast<size_t>(a) * masks + b] = grad;
      cross_lat[static_cast<size_t>(a) * masks + b] = lat;
    }
  // End-of-round time (all-reduce, then the update) per (layer range, group).
  const auto W = static_cast<size_t>(L + 1);
  std::vector<double> ar(W * W * masks, 0.0);
  for (int a = 0; a < L; ++a)
    for (int e = a + 1; e <= L; ++e)
      for (int m = 1; m < masks; ++m)
        ar[(a * W + e) * masks + m] =
          allreduce_s(c, group[m], static_cast<double>(t.param_bytes(a, e)))
          + update_s(t, c, a, e, group[m]);

  double best_T = inf;
  plan best;
  std::vector<share_allocation> allocs;
  std::vector<int> memo;
  std::vector<int> label(N);
  std::vector<int> mask(Pmax);
  std::vector<int> cuts(Pmax + 1);
  std::vector<double> f(2 * Pmax), b(2 * Pmax), a(2 * Pmax);
  std::vector<int> alloc_of(Pmax);
  for (int M : Ms) {
    const int64_t micro = batch / M;
    allocs.clear();
    // memo[((first*W + end)*masks + mask)*(Pmax+1) + K]: -2 unknown, -1 infeasible.
    memo.assign(W * W * masks * (Pmax + 1), -2);
    auto alloc = [&](int first, int end, int m, int K) {
      auto& slot = memo[((first * W + end) * masks + m) * (Pmax + 1) + K];
      if (slot == -2) {
        auto r = allocate_stage(t, c, first, end, group[m], micro, K);
        if (r.feasible && !has_idle_member(r)) {
          slot = static_cast<int>(allocs.size());
          allocs.push_back(std::move(r));
        } else {
          slot = -1;
        }
      }
      return slot;
    };
    for (int P = 1; P <= Pmax; ++P) {
      // Odometer over labelings in {-1, 0..P-1}^N.
      std::fill(label.begin(), label.end(), -1);
      for (;;) {
        std::fill(mask.begin(), mask.begin() + P, 0);
        for (int k = 0; k < N; ++k)
          if (label[k] >= 0)
            mask[label[k]] |= 1 << k;
        bool all = std::all_of(mask.begin(), mask.begin() + P, [](int m) { return m != 0; });
        if (all) {
          // Cuts 0 = c_0 < c_1 < ... < c_P = L, via combinations.
          std::vector<int> inner(P - 1);
          for (int k = 0; k < P - 1; ++k)
            inner[k] = k + 1;
          for (;;) {
            cuts[0] = 0;
            for (int k = 0; k < P - 1; ++k)
              cuts[k + 1] = inner[k];
            cuts[P] = L;
            bool ok = true;
            for (int s = 0; s < P && ok; ++s) {
              int K = in_flight_micro_batches(s, P, M);
              int id = alloc(cuts[s], cuts[s + 1], mask[s], K);
              if (id < 0) {
                ok = false;
                break;
              }
              alloc_of[s] = id;
            }
            if (ok) {
              // Steps and their round latency.
              int S = 2 * P - 1;
              for (int s = 0; s < P; ++s) {
                const auto& r = allocs[alloc_of[s]];
                f[2 * s] = r.forward_s;
                b[2 * s] = r.backward_s;
                a[2 * s] = ar[(cuts[s] * W + cuts[s + 1]) * masks + mask[s]];
                if (s + 1 < P) {
                  double bytes = static_cast<double>(t.boundary_bytes_per_sample(cuts[s + 1])) *
                                 static_cast<double>(micro);
                  auto fw = static_cast<size_t>(mask[s]) * masks + mask[s + 1];
                  auto bw = static_cast<size_t>(mask[s + 1]) * masks + mask[s];
                  f[2 * s + 1] = bytes > 0 ? bytes / cross_act[fw]
                                                 + cross_lat[fw]
                                           : 0.0;
                  b[2 * s + 1] = bytes > 0 ? bytes / cross_grad[bw]
                                                 + cross_lat[bw]
                                           : 0.0;
                  a[2 * s + 1] = 0.0;
                }
              }
              double T = round_latency(f.data(), b.data(), a.data(), S, M, c.full_duplex_links);
              if (T < best_T) {
                best_T = T;
                best = plan{};
                best.batch_size = batch;
                best.micro_batches = M;
                for (int s = 0; s < P; ++s)
                  best.stages.push_back(
                    {cuts[s], cuts[s + 1], group[mask[s]], allocs[alloc_of[s]].shares});
              }
            }
            // next combination of P-1 cut points from 1..L-1
            int k = P - 2;
            while (k >= 0 && inner[k] == L - 1 - (P - 2 - k))
              --k;
            if (k < 0)
              break;
            ++inner[k];
            for (int q = k + 1; q < P - 1; ++q)
              inner[q] = inner[q - 1] + 1;
          }
        }
        int k = 0;
        while (k < N && label[k] == P - 1) {
          label[k] = -1;
          ++k;
        }
        if (k == N)
          break;
        ++label[k];
      }
    }
  }
  if (!(best_T < inf))
    throw planner_error("exhaustive: infeasible: no plan fits memory on " + std::to_string(N) +
                        " devices for batch " + std::to_string(batch));
  best.planner = "exhaustive";
  evaluate(best, t, c);
  check_memory(best, c);
  return best;
}

} // namespace asteroid::planner
