#include "asteroid/planner/asteroid_planner.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <unordered_map>

#include "asteroid/planner/allocation.hpp"
#include "asteroid/planner/co_location.hpp"
#include "asteroid/planner/cost_model.hpp"
#include "asteroid/planner/error.hpp"
#include "asteroid/planner/json_io.hpp"

namespace asteroid::planner {

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();

// A suffix plan kept by a DP state: its step summary and its head stage.
struct suffix_state {
  double T = inf;
  pipeline_summary sum;
  int end_layer = 0;   // head stage is [i, end_layer)
  int group_begin = 0; // head group is order[group_begin, group_end)
  int group_end = 0;
  int next_slot = 0;   // which slot of the next state the rest of the plan is
  bool valid() const { return T < inf; }
  // What the suffix costs a new first stage that dominates the round (or a
  // dominant link in front of it): its whole step sum plus the all-reduce
  // term that can stick out after the drain.
  double head_key() const { return valid() ? sum.SFB + std::max(0.0, sum.Z) : inf; }
};

// Each DP state keeps up to `slots` (asteroid_options::suffixes_per_state)
// suffixes: slot 0 is the fastest on its
// own (best when the period stays the suffix's); the others are a Pareto
// set over (period Pi, head_key, leading sums U), sorted by Pi: when a
// stage put in front sets the period, what counts is the smallest step sum
// among suffixes whose period stays below the new one, and the window
// cycles the new stage starts run through the suffix's first stages (U).
// A single suffix per state missed optimal plans by ~0.5% on the paper's
// environments; without U, by up to 2.5% on random instances; with 4, by up
// to 2.1% on 12 of the 64 paper instances (planner_bench --paper-exact).

// A lower bound on the round latency T = SFB + (M-1) Pi + Z of `s` behind a
// new first stage (f, b, a) and a link (cf, cb) that keeps one or both
// directions busy for `link_busy`: prepending never lowers T, since SFB
// grows by f + b + cf + cb, Pi only grows and Z drops by at most b + cb
// (pipeline_summary::prepend). With cf = cb = link_busy = 0 it bounds the new
// T before the link is priced.
double latency_after_prepend_at_least(const pipeline_summary& s, double f, double b, double a,
                                      double cf, double cb, double link_busy) {
  const double h = f + b;
  return s.SFB + h + cf + cb + (s.micro_batches - 1.0) * std::max({s.Pi, h, link_busy}) +
         std::max({a, -b, s.Z - b - cb});
}

bool same_suffix(const suffix_state& a, const suffix_state& b) {
  return a.end_layer == b.end_layer && a.group_begin == b.group_begin &&
         a.group_end == b.group_end && a.next_slot == b.next_slot && a.T == b.T;
}

// Leading sums of a suffix that window cycles started by a stage put in
// front can use (all suffixes of one DP state have the same stage count).
int window_entries(const pipeline_summary& s) {
  return std::min({s.stages, pipeline_summary::max_window - 1, s.micro_batches - 1});
}

// True when e is at least as good as a suffix with period D, head key `key`
// and leading sums u(t), t < n, for whatever stage is put in front.
template <class LeadingSums>
bool covers(const suffix_state& e, double D, double key, int n, LeadingSums u) {
  if (e.sum.Pi > D || e.head_key() > key)
    return false;
  for (int t = 0; t < n; ++t)
    if (e.sum.U[t] > u(t))
      return false;
  return true;
}

// True when q (slots) holds a suffix at least as good as (D, key, u).
template <class LeadingSums>
bool front_covers(const suffix_state* q, int slots, double D, double key, int n,
                  LeadingSums u) {
  for (int k = 1; k < slots && q[k].valid(); ++k)
    if (covers(q[k], D, key, n, u))
      return true;
  return false;
}

void offer(suffix_state* q, int slots, const suffix_state& s) {
  if (s.T < q[0].T)
    q[0] = s;
  const double D = s.sum.Pi;
  const double key = s.head_key();
  const int n = window_entries(s.sum);
  if (front_covers(q, slots, D, key, n, [&](int t) { return s.sum.U[t]; }))
    return;
  // Drop what s dominates, insert s by Pi, cut to capacity (keeping the
  // smallest Pi: balanced suffixes matter most when M is large). In place:
  // suffixes are a few hundred bytes, and this runs for every transition.
  int m = 1;
  for (int k = 1; k < slots && q[k].valid(); ++k) {
    if (covers(s, q[k].sum.Pi, q[k].head_key(), n, [&](int t) { return q[k].sum.U[t]; }))
      continue;
    if (m != k)
      q[m] = q[k];
    ++m;
  }
  int at = 1;
  while (at < m && q[at].sum.Pi <= D)
    ++at;
  if (at >= slots)
    return;
  for (int k = std::min(m, slots - 1); k > at; --k)
    q[k] = q[k - 1];
  q[at] = s;
  for (int k = std::min(m, slots - 1) + 1; k < slots; ++k)
    q[k].T = inf;
}

// Link tables for one device ordering (positions, not device indices).
struct ordering_links {
  int n = 0;
  std::vector<int> order;
  std::vector<double> speed;
  std::vector<int64_t> budget;
  // in_bw is a link's bandwidth (a ring is compressed as a whole, by its
  // slowest link); out_bw and in_bw_to are payload rates
  // (cluster::payload_rate), each link's codec counted.
  std::vector<double> in_bw;   // [a*(n+1)+b]: slowest link inside [a, b)
  std::vector<double> in_lat;  // largest latency inside [a, b)
  // [(a*n + s)*(n+1) + e]: slowest link a -> [s, e), and [s, e) -> a.
  std::vector<double> out_bw, in_bw_to, out_lat, in_lat_to;
  // [a*(n+1)+b]: the slowest member and the smallest budget of [a, b).
  std::vector<double> min_speed;
  std::vector<int64_t> min_budget;

  explicit ordering_links(const cluster& c, std::vector<int> ord)
      : n(static_cast<int>(ord.size())), order(std::move(ord)) {
    for (int d : order) {
      speed.push_back(c.devices[d].speed);
      budget.push_back(c.devices[d].memory_bytes);
    }
    const auto W = static_cast<size_t>(n + 1);
    min_speed.assign(W * W, inf);
    min_budget.assign(W * W, std::numeric_limits<int64_t>::max());
    for (int a = 0; a < n; ++a)
      for (int b = a + 1; b <= n; ++b) {
        min_speed[a * W + b] = std::min(min_speed[a * W + b - 1], speed[b - 1]);
        min_budget[a * W + b] = std::min(min_budget[a * W + b - 1], budget[b - 1]);
      }
    in_bw.assign(W * W, inf);
    in_lat.assign(W * W, 0.0);
    for (int a = 0; a < n; ++a) {
      double bw = inf;
      double lat = 0.0;
      for (int b = a + 1; b < n; ++b) {
        for (int k = a; k < b; ++k) {
          bw = std::min({bw, c.bandwidth(order[k], order[b]), c.bandwidth(order[b], order[k])});
          lat = std::max({lat, c.latency(order[k], order[b]), c.latency(order[b], order[k])});
        }
        in_bw[a * W + b + 1] = bw;
        in_lat[a * W + b + 1] = lat;
      }
    }
    const auto sz = static_cast<size_t>(n) * n * W;
    out_bw.assign(sz, inf);
    in_bw_to.assign(sz, inf);
    out_lat.assign(sz, 0.0);
    in_lat_to.assign(sz, 0.0);
    for (int a = 0; a < n; ++a)
      for (int s = 0; s < n; ++s) {
        double ob = inf, ib = inf, ol = 0.0, il = 0.0;
        for (int e = s + 1; e <= n; ++e) {
          int b = e - 1;
          if (b != a) {
            ob = std::min(ob, c.payload_rate(order[a], order[b], traffic::activations));
            ib = std::min(ib, c.payload_rate(order[b], order[a], traffic::gradients));
            ol = std::max(ol, c.latency(order[a], order[b]));
            il = std::max(il, c.latency(order[b], order[a]));
          }
          auto idx = (static_cast<size_t>(a) * n + s) * W + e;
          out_bw[idx] = ob;
          in_bw_to[idx] = ib;
          out_lat[idx] = ol;
          in_lat_to[idx] = il;
        }
      }
  }
};

// Algorithm 1 results shared by the DP runs of one micro-batch count: the
// allocation depends on the layer range and on the group's members only
// through their speeds and budgets, so the key is the range plus the group's
// composition (count of devices per speed/budget class, mixed radix).
struct alloc_memo {
  bool enabled = false;
  uint64_t compositions = 1; // product of (class size + 1)
  std::vector<uint64_t> weight; // per device: radix weight of its class
  std::unordered_map<uint64_t, std::pair<double, double>> free;   // no cap binds
  std::unordered_map<uint64_t, std::pair<double, double>> capped; // by K; f < 0: infeasible
};

struct dp_result {
  double T = inf;
  int stages = 0;
  plan best;
};

class dp_solver {
public:
  // `table` is the state storage, reused across runs: it is a few MB, and
  // allocating it afresh for every ordering and M costs page faults.
  dp_solver(const cost_tables& t, const cluster& c, const ordering_links& o, int64_t batch,
            int M, int max_stages, int slots, alloc_memo* memo, double bound,
            std::vector<suffix_state>& table)
      : t_(t), c_(c), o_(o), batch_(batch), M_(M), micro_(batch / M), bound_(bound),
        slots_(slots), Q_(table), memo_(memo && memo->enabled ? memo : nullptr) {
    L_ = t.num_layers();
    N_ = o.n;
    P_ = std::min(L_, N_);
    if (max_stages > 0)
      P_ = std::min(P_, max_stages);
    // Only the states past the last position start empty: run() starts
    // every other state as a copy of its right neighbour, so the table needs
    // no clearing between runs (clearing it cost a tenth of the search).
    Q_.resize(static_cast<size_t>(P_ + 1) * L_ * (N_ + 1) * slots_);
    for (int i = 0; i < L_; ++i)
      for (int p = 0; p <= P_; ++p)
        Q(p, i, N_)[0].T = Q(p, i, N_)[1].T = inf;
    head_T_.assign(static_cast<size_t>(P_ + 1) * L_ * (N_ + 1), inf);
    if (memo_) {
      comp_prefix_.assign(N_ + 1, 0);
      for (int k = 0; k < N_; ++k)
        comp_prefix_[k + 1] = comp_prefix_[k] + memo_->weight[o.order[k]];
    }
  }

  suffix_state* Q(int p, int i, int j) {
    return &Q_[((static_cast<size_t>(i) * (N_ + 1) + j) * (P_ + 1) + p) * slots_];
  }

  // Round latency of the fastest suffix of a state (inf: none). The states
  // a head can be followed by lie far apart in the table, and most hold
  // nothing under the bound: this small table says so without a cache miss.
  double& head_T(int p, int i, int j) {
    return head_T_[(static_cast<size_t>(i) * (N_ + 1) + j) * (P_ + 1) + p];
  }

  // Algorithm 1 for head layers [i, i2) on positions [j, j2) with K stashed
  // micro-batches; false when the group cannot hold the stage. Shares are
  // left in `out` only when `want_shares`.
  bool head_alloc(int i, int i2, int j, int j2, int K, share_allocation& out) {
    const int g = j2 - j;
    idle_member_ = false;
    int64_t caps[64];
    std::vector<int64_t> caps_big;
    int64_t* cp = caps;
    if (g > 64) {
      caps_big.resize(g);
      cp = caps_big.data();
    }
    int64_t sum = 0;
    for (int k = 0; k < g; ++k) {
      cp[k] = t_.max_share_within(i, i2, K, o_.budget[j + k], micro_);
      if (cp[k] < 0)
        return false;
      sum += cp[k];
    }
    if (sum < micro_)
      return false;
    auto ref = [&](int64_t y) {
      return std::make_pair(t_.forward_s(i, i2, y), t_.backward_s(i, i2, y));
    };
    if (g > micro_)
      return false; // some member would get no sample, whatever K
    detail::allocate_shares(micro_, &o_.speed[j], cp, g, ref, out);
    // Algorithm 1 left a slow member without samples: with other caps
    // (another K) it may not, so this is not a verdict for larger K.
    idle_member_ = has_idle_member(out);
    return !idle_member_;
  }

  // Per-head cache over K: the allocation only changes when some cap binds.
  // K <= k_free_ leaves every cap at the micro-batch size (no memory limit).
  void head_begin(int i, int i2, int j, int j2) {
    hi_ = i;
    hi2_ = i2;
    hj_ = j;
    hj2_ = j2;
    have_free_ = false;
    last_K_ = -1;
    if (memo_)
      key_ = (static_cast<uint64_t>(i) * (L_ + 1) + i2) * memo_->compositions +
             (comp_prefix_[j2] - comp_prefix_[j]);
    const int64_t fixed = t_.fixed_bytes(i, i2);
    const int64_t act = t_.activation_bytes_per_sample(i, i2);
    const int64_t work = t_.working_bytes_per_sample(i, i2);
    // The smallest budget binds first (the quotient rounds down
    // monotonically): one division for the whole group.
    const int64_t room = o_.min_budget[hj_ * (N_ + 1) + hj2_] - fixed - micro_ * work;
    if (room < 0)
      k_free_ = 0;
    else if (act > 0)
      k_free_ = static_cast<int>(
        std::min<int64_t>(std::numeric_limits<int>::max(), room / (micro_ * act)));
    else
      k_free_ = std::numeric_limits<int>::max();
  }

  // Forward / backward maxima of the head for K; false when infeasible.
  bool head_times(int K, double& f, double& b) {
    if (K <= k_free_) {
      if (!have_free_) {
        if (memo_) {
          auto it = memo_->free.find(key_);
          if (it == memo_->free.end()) {
            bool ok = head_alloc(hi_, hi2_, hj_, hj2_, 1, scratch_);
            it = memo_->free
                   .emplace(key_, ok ? std::make_pair(scratch_.forward_s, scratch_.backward_s)
                                     : std::make_pair(-1.0, -1.0))
                   .first;
          }
          free_f_ = it->second.first;
          free_b_ = it->second.second;
        } else {
          bool ok = head_alloc(hi_, hi2_, hj_, hj2_, 1, scratch_);
          free_f_ = ok ? scratch_.forward_s : -1.0;
          free_b_ = ok ? scratch_.backward_s : -1.0;
        }
        have_free_ = true;
      }
      f = free_f_;
      b = free_b_;
      // No cap binds here, so a failure is a member without samples.
      idle_member_ = free_f_ < 0.0;
      return free_f_ >= 0.0;
    }
    if (K == last_K_) {
      f = last_f_;
      b = last_b_;
      idle_member_ = last_idle_;
      return last_ok_;
    }
    last_K_ = K;
    if (memo_) {
      uint64_t key = key_ * static_cast<uint64_t>(P_ + 1) + static_cast<uint64_t>(K);
      auto it = memo_->capped.find(key);
      if (it == memo_->capped.end()) {
        bool ok = head_alloc(hi_, hi2_, hj_, hj2_, K, scratch_);
        const double no = idle_member_ ? -2.0 : -1.0;
        it = memo_->capped
               .emplace(key, ok ? std::make_pair(scratch_.forward_s, scratch_.backward_s)
                                : std::make_pair(no, no))
               .first;
      }
      last_ok_ = it->second.first >= 0.0;
      idle_member_ = it->second.first == -2.0;
      last_f_ = f = it->second.first;
      last_b_ = b = it->second.second;
      last_idle_ = idle_member_;
      return last_ok_;
    }
    last_ok_ = head_alloc(hi_, hi2_, hj_, hj2_, K, scratch_);
    last_idle_ = idle_member_;
    last_f_ = f = scratch_.forward_s;
    last_b_ = b = scratch_.backward_s;
    return last_ok_;
  }

  double allreduce(int i, int i2, int j, int j2) const {
    const int g = j2 - j;
    double bytes = static_cast<double>(t_.param_bytes(i, i2));
    if (g <= 1 || bytes <= 0.0)
      return 0.0;
    const auto W = static_cast<size_t>(N_ + 1);
    const double bw = o_.in_bw[j * W + j2];
    double steps = 2.0 * (g - 1);
    return steps / g * bytes * c_.wire_ratio_at(bw, traffic::all_reduce) / bw
           + steps * o_.in_lat[j * W + j2];
  }

  // The head's update on its slowest member (cost_tables::update_s).
  double update(int i, int i2, int j, int j2) const {
    const double u = t_.update_s(i, i2);
    if (u <= 0.0)
      return 0.0;
    return u / o_.min_speed[j * (N_ + 1) + j2];
  }

  void run() {
    const double Md = static_cast<double>(M_);
    const auto W = static_cast<size_t>(N_ + 1);
    for (int i = L_ - 1; i >= 0; --i) {
      for (int j = N_ - 1; j >= 0; --j) {
        for (int p = 1; p <= P_; ++p) { // device j idle
          const suffix_state* idle = Q(p, i, j + 1);
          suffix_state* q = Q(p, i, j);
          // Slots past the first empty one may be stale (from an earlier
          // run): offer() and the readers stop at the first empty slot.
          q[0] = idle[0];
          for (int k = 1; k < slots_; ++k) {
            q[k] = idle[k];
            if (!idle[k].valid())
              break;
          }
        }
        for (int j2 = j + 1; j2 <= N_; ++j2) {
          for (int i2 = i + 1; i2 <= L_; ++i2) {
            const int pmax = std::min({P_, L_ - i, N_ - j});
            if (i2 < L_) {
              if (j2 >= N_)
                continue;
              // A head that no suffix under the bound can follow needs no
              // allocation.
              int p = 2;
              while (p <= pmax && !(head_T(p - 1, i2, j2) < bound_))
                ++p;
              if (p > pmax)
                continue;
            }
            head_begin(i, i2, j, j2);
            const double a = allreduce(i, i2, j, j2) + update(i, i2, j, j2);
            double hf = 0.0;
            double hb = 0.0;
            if (i2 == L_) {
              if (!head_times(1, hf, hb) || Md * (hf + hb) >= bound_)
                continue;
              suffix_state s;
              s.sum = pipeline_summary::stage(hf, hb, a, M_);
              s.T = s.sum.latency();
              if (s.T >= bound_)
                continue;
              s.end_layer = L_;
              s.group_begin = j;
              s.group_end = j2;
              offer(Q(1, i, j), slots_, s);
              continue;
            }
            const double bytes =
              static_cast<double>(t_.boundary_bytes_per_sample(i2)) * static_cast<double>(micro_);
            for (int p = 2; p <= pmax; ++p) {
              suffix_state* into = Q(p, i, j);
              if (!(head_T(p - 1, i2, j2) < bound_))
                continue;
              const suffix_state* from = Q(p - 1, i2, j2);
              for (int slot = 0; slot < slots_; ++slot) {
                const auto& S = from[slot];
                if (!S.valid())
                  break;
                if (slot > 0 && same_suffix(S, from[0]))
                  continue;
                if (!head_times(std::min(p, M_), hf, hb)) {
                  if (idle_member_)
                    break; // another K may give every member samples
                  goto next_head; // more stashed micro-batches will not fit either
                }
                // A suffix whose T reaches the best plan known cannot be
                // part of a better one (prepending never lowers T).
                const double before_link =
                  latency_after_prepend_at_least(S.sum, hf, hb, a, 0.0, 0.0, 0.0);
                if (before_link >= bound_)
                  continue;
                // Skip what cannot enter the state: it is not the fastest
                // and a kept suffix is at least as good for any new head.
                if (before_link >= into[0].T &&
                    front_covers(into, slots_, std::max(hf + hb, S.sum.Pi), S.sum.SFB + hf + hb,
                                 std::min({S.sum.stages + 1,
                                           pipeline_summary::max_window - 1, M_ - 1}),
                                 [&](int t) { return t == 0 ? hf + hb : hf + hb + S.sum.U[t - 1]; }))
                  continue;
                double cf = 0.0;
                double cb = 0.0;
                if (bytes > 0.0) {
                  double ob = inf, ib = inf, ol = 0.0, il = 0.0;
                  for (int k = j; k < j2; ++k) {
                    auto idx = (static_cast<size_t>(k) * N_ + S.group_begin) * W + S.group_end;
                    ob = std::min(ob, o_.out_bw[idx]);
                    ib = std::min(ib, o_.in_bw_to[idx]);
                    ol = std::max(ol, o_.out_lat[idx]);
                    il = std::max(il, o_.in_lat_to[idx]);
                  }
                  cf = bytes / ob + ol;
                  cb = bytes / ib + il;
                  const double busy = c_.full_duplex_links ? std::max(cf, cb) : cf + cb;
                  if (latency_after_prepend_at_least(S.sum, hf, hb, a, cf, cb, busy) >= bound_)
                    continue;
                }
                suffix_state s;
                s.sum = S.sum.prepend(hf, hb, a, cf, cb, c_.full_duplex_links);
                s.T = s.sum.latency();
                if (s.T >= bound_)
                  continue;
                s.end_layer = i2;
                s.group_begin = j;
                s.group_end = j2;
                s.next_slot = slot;
                offer(into, slots_, s);
              }
            }
          next_head:;
          }
        }
        for (int p = 1; p <= P_; ++p)
          head_T(p, i, j) = Q(p, i, j)[0].T;
      }
    }
  }

  // The best full plan found (T = inf when none).
  dp_result best() {
    dp_result r;
    int bp = 0;
    for (int p = 1; p <= P_; ++p)
      if (Q(p, 0, 0)[0].T < r.T) {
        r.T = Q(p, 0, 0)[0].T;
        bp = p;
      }
    if (bp == 0)
      return r;
    r.stages = bp;
    r.best.batch_size = batch_;
    r.best.micro_batches = M_;
    int i = 0;
    int j = 0;
    int slot = 0;
    share_allocation alloc;
    for (int p = bp; p >= 1; --p) {
      const auto& s = Q(p, i, j)[slot];
      stage_plan st;
      st.first_layer = i;
      st.end_layer = s.end_layer;
      if (!head_alloc(i, s.end_layer, s.group_begin, s.group_end, std::min(p, M_), alloc))
        throw planner_error("asteroid: internal error: DP stage no longer fits");
      for (int k = s.group_begin; k < s.group_end; ++k)
        st.devices.push_back(o_.order[k]);
      st.shares = alloc.shares;
      r.best.stages.push_back(std::move(st));
      i = s.end_layer;
      j = s.group_end;
      slot = s.next_slot;
    }
    return r;
  }

private:
  const cost_tables& t_;
  const cluster& c_;
  const ordering_links& o_;
  int64_t batch_;
  int M_;
  int64_t micro_;
  // Round latency of the best plan known: a suffix whose round latency is
  // at least this cannot be part of a better plan (prepending never lowers
  // it; see run()), so it is not kept.
  double bound_;
  int slots_;
  int L_ = 0, N_ = 0, P_ = 0;
  std::vector<suffix_state>& Q_;
  std::vector<double> head_T_;
  alloc_memo* memo_ = nullptr;
  std::vector<uint64_t> comp_prefix_;
  uint64_t key_ = 0;
  share_allocation scratch_;
  int hi_ = 0, hi2_ = 0, hj_ = 0, hj2_ = 0;
  int k_free_ = 0;
  bool have_free_ = false;
  double free_f_ = 0.0, free_b_ = 0.0;
  int last_K_ = -1;
  bool last_ok_ = false;
  bool last_idle_ = false;
  // The last allocation failed only because a member got no sample.
  bool idle_member_ = false;
  double last_f_ = 0.0, last_b_ = 0.0;
};

[[noreturn]] void explain_infeasible(const model_profile& profile, const cost_tables& t,
                                     const cluster& c, int64_t batch) {
  int big = 0;
  int64_t total_budget = 0;
  for (int d = 0; d < c.size(); ++d) {
    if (c.devices[d].memory_bytes > c.devices[big].memory_bytes)
      big = d;
    total_budget += c.devices[d].memory_bytes;
  }
  const auto& bd = c.devices[big];
  const int L = t.num_layers();
  int64_t total_need = 0;
  for (int l = 0; l < L; ++l) {
    auto need = t.memory_bytes(l, l + 1, 1, 1);
    total_need += t.fixed_bytes(l, l + 1);
    if (need > bd.memory_bytes)
      throw planner_error(
        "asteroid: no feasible plan for batch " + std::to_string(batch) + ": layer " +
        std::to_string(l) + " (" + profile.layers[l].name + ") needs " + format_bytes(need) +
        " with one sample per micro-batch, but the largest device " + bd.name + " has " +
        format_bytes(bd.memory_bytes) + " (short by " +
        std::to_string(need - bd.memory_bytes) + " bytes)");
  }
  if (total_need > total_budget)
    throw planner_error("asteroid: no feasible plan for batch " + std::to_string(batch) +
                        ": weights, gradients and optimizer state need " +
                        format_bytes(total_need) + " but all devices together have " +
                        format_bytes(total_budget) + " (short by " +
                        std::to_string(total_need - total_budget) +
                        " bytes; tightest device: " + bd.name + ")");
  std::vector<int> all(c.size());
  std::iota(all.begin(), all.end(), 0);
  auto a = allocate_stage(t, c, 0, L, all, 1, 1);
  std::string detail;
  if (a.tightest >= 0)
    detail = "; as one data-parallel stage, device " + c.devices[all[a.tightest]].name +
             " is short by " + std::to_string(a.shortfall_bytes) + " bytes";
  throw planner_error("asteroid: no feasible plan found for batch " + std::to_string(batch) +
                      " on " + std::to_string(c.size()) + " devices" + detail);
}

// n! / prod(count_k!) for the class labels, or limit + 1 when larger.
int64_t distinct_orderings(const std::vector<int>& cls, int64_t limit) {
  std::vector<int> counts(cls.size(), 0);
  for (int k : cls)
    ++counts[k];
  // Multiply binomials class by class: C(placed + c_k, c_k).
  double total = 1.0;
  int placed = 0;
  for (int ck : counts) {
    for (int i = 1; i <= ck; ++i) {
      total = total * (placed + i) / i;
      if (total > static_cast<double>(limit) + 1.0)
        return limit + 1;
    }
    placed += ck;
  }
  return static_cast<int64_t>(total + 0.5);
}

} // namespace

double estimated_search_seconds(int devices, int layers, int micro_batch_counts) {
  // Fitted on a 2-core Intel Xeon host (2026-12-02), batch 32 (6
  // micro-batch counts), devices of distinct speeds: 4 layers (the CNN) on
  // 64, 80, 100 and 200 devices took 1.05, 2.02, 4.22 and 42.2 s; 20 layers
  // (MobileNetV2) on 20 and 50 devices 0.62 and 10.2 s. (Before the DP
  // pruned by round latency the constant was 2.6e-8.)
  constexpr double seconds_per_unit = 5e-9;
  return seconds_per_unit * micro_batch_counts * std::pow(devices, 3.5) * layers * layers;
}

asteroid_planner::asteroid_planner(asteroid_options options) : options_(std::move(options)) {}

std::vector<int> asteroid_planner::device_order(const cluster& c, const std::string& ordering) {
  const int n = c.size();
  std::vector<int> ord(n);
  std::iota(ord.begin(), ord.end(), 0);
  const auto& d = c.devices;
  auto by_memory = [&](int a, int b) {
    if (d[a].memory_bytes != d[b].memory_bytes)
      return d[a].memory_bytes > d[b].memory_bytes;
    if (d[a].speed != d[b].speed)
      return d[a].speed > d[b].speed;
    return a < b;
  };
  auto by_speed = [&](int a, int b) {
    if (d[a].speed != d[b].speed)
      return d[a].speed > d[b].speed;
    if (d[a].memory_bytes != d[b].memory_bytes)
      return d[a].memory_bytes > d[b].memory_bytes;
    return a < b;
  };
  if (ordering == "memory") {
    std::stable_sort(ord.begin(), ord.end(), by_memory);
  } else if (ordering == "memory-asc") {
    std::stable_sort(ord.begin(), ord.end(), by_memory);
    std::reverse(ord.begin(), ord.end());
  } else if (ordering == "speed") {
    std::stable_sort(ord.begin(), ord.end(), by_speed);
  } else if (ordering == "speed-asc") {
    std::stable_sort(ord.begin(), ord.end(), by_speed);
    std::reverse(ord.begin(), ord.end());
  } else if (ordering == "cluster") {
    // file order
  } else if (ordering == "bandwidth") {
    // Devices joined by fast links end up next to each other, so contiguous
    // groups and neighbouring stages get fast links.
    std::vector<int> out;
    std::vector<bool> used(n, false);
    int cur = *std::min_element(ord.begin(), ord.end(), by_speed);
    while (static_cast<int>(out.size()) < n) {
      out.push_back(cur);
      used[cur] = true;
      int next = -1;
      double best = -1.0;
      for (int k = 0; k < n; ++k) {
        if (used[k])
          continue;
        double bw = std::min(c.bandwidth(cur, k), c.bandwidth(k, cur));
        if (bw > best || (bw == best && next >= 0 && by_speed(k, next))) {
          best = bw;
          next = k;
        }
      }
      cur = next;
    }
    ord = out;
  } else {
    throw planner_error("asteroid: unknown device ordering \"" + ordering +
                        "\" (known: memory, memory-asc, speed, speed-asc, cluster, bandwidth)");
  }
  return ord;
}

plan asteroid_planner::make_plan(const model_profile& profile, const cluster& c,
                                 int64_t batch_size) {
  return plan_co_located(profile, c, batch_size, name(), [&](const cluster& shared) {
    return search(profile, shared, batch_size);
  });
}

plan asteroid_planner::search(const model_profile& profile, const cluster& c,
                              int64_t batch_size) {
  if (batch_size <= 0)
    throw planner_error("asteroid: batch size must be positive, got " +
                        std::to_string(batch_size));
  if (profile.num_layers() == 0)
    throw planner_error("asteroid: profile of " + profile.model + " has no layers");
  if (c.size() == 0)
    throw planner_error("asteroid: cluster " + c.name + " has no devices");
  cost_tables t(profile, batch_size);
  std::vector<int> Ms;
  for (int M : micro_batch_candidates(batch_size))
    if (options_.max_micro_batches <= 0 || M <= options_.max_micro_batches)
      Ms.push_back(M);
  if (options_.max_search_seconds > 0) {
    // Said up front: 200 devices ran for minutes before anyone was told.
    auto estimate = estimated_search_seconds(c.size(), profile.num_layers(),
                                             static_cast<int>(Ms.size()));
    if (estimate > options_.max_search_seconds) {
      char what[640];
      std::snprintf(what, sizeof what,
                    "asteroid: planning %d layers of %s on the %d devices of "
                    "cluster %s would take about %.*f s (the search grows as "
                    "devices^3.5 x layers^2; at most %g s is allowed): plan "
                    "on fewer devices, or with fewer micro-batch counts "
                    "(asteroid plan --max-micro-batches), or allow more time "
                    "(asteroid plan --max-search-seconds; 0: no limit) and give "
                    "a job the plan",
                    profile.num_layers(), profile.model.c_str(), c.size(),
                    c.name.c_str(), estimate >= 10 ? 0 : 3, estimate,
                    options_.max_search_seconds);
      throw planner_error(what);
    }
  }
  if (options_.suffixes_per_state < 2)
    throw planner_error("asteroid: suffixes_per_state must be at least 2, got " +
                        std::to_string(options_.suffixes_per_state));
  const int slots = options_.suffixes_per_state;
  dp_result best;
  std::vector<int> best_order;
  int best_M = 0;
  // Algorithm 1 memo, rebuilt per micro-batch count (M is the outer loop).
  alloc_memo memo;
  int memo_M = -1;
  {
    std::vector<int> acls(c.size());
    for (int d = 0; d < c.size(); ++d) {
      acls[d] = d;
      for (int e = 0; e < d; ++e)
        if (c.devices[e].speed == c.devices[d].speed &&
            c.devices[e].memory_bytes == c.devices[d].memory_bytes) {
          acls[d] = acls[e];
          break;
        }
    }
    std::vector<uint64_t> count(c.size(), 0);
    for (int d = 0; d < c.size(); ++d)
      ++count[acls[d]];
    std::vector<uint64_t> radix(c.size(), 0);
    double total = 1.0;
    uint64_t r = 1;
    for (int k = 0; k < c.size(); ++k) {
      if (count[k] == 0)
        continue;
      radix[k] = r;
      r *= count[k] + 1;
      total *= static_cast<double>(count[k] + 1);
    }
    const double ranges = static_cast<double>(profile.num_layers() + 1) *
                          (profile.num_layers() + 1) * (std::min(profile.num_layers(), c.size()) + 1);
    memo.enabled = total * ranges < 1.8e19;
    memo.compositions = r;
    for (int d = 0; d < c.size(); ++d)
      memo.weight.push_back(radix[acls[d]]);
  }
  std::vector<suffix_state> dp_table;
  // Rounds within 1e-9 of each other are one price reached through other
  // sums (a one-device plan costs M x (f + b) of B / M samples, which the
  // profile makes B's f + b): the fewer micro-batches win, because each
  // costs the runtime messages and per-pass overhead the model leaves out.
  // Without it, 7 of the 18 one-device plans of the test `asteroid takes
  // the fewest micro-batches ...` were split on a rounding error.
  auto improves = [&](double T, int M) {
    if (!(best.T < inf))
      return T < inf;
    const double tie = 1e-9 * best.T;
    if (M < best_M)
      return T <= best.T + tie;
    if (M > best_M)
      return T < best.T - tie;
    return T < best.T;
  };
  auto solve = [&](const std::vector<int>& order, int M) {
    if (M != memo_M) {
      memo.free.clear();
      memo.capped.clear();
      memo_M = M;
    }
    ordering_links links(c, order);
    // The bound prunes what cannot improve: a tie still can, with fewer
    // micro-batches.
    const double bound = M < best_M && best.T < inf ? best.T * (1 + 2e-9) : best.T;
    dp_solver dp(t, c, links, batch_size, M, options_.max_stages, slots, &memo, bound,
                 dp_table);
    dp.run();
    auto r = dp.best();
    if (improves(r.T, M)) {
      best = std::move(r);
      best_order = order;
      best_M = M;
      return true;
    }
    return false;
  };

  // Devices that are interchangeable (same speed and budget on a cluster
  // whose links are all alike) form one class: orderings that differ only
  // by swapping them give the same plans.
  const int n = c.size();
  std::vector<int> cls(n);
  std::iota(cls.begin(), cls.end(), 0);
  if (c.uniform_links()) {
    for (int d = 0; d < n; ++d)
      for (int e = 0; e < d; ++e)
        if (c.devices[e].speed == c.devices[d].speed &&
            c.devices[e].memory_bytes == c.devices[d].memory_bytes) {
          cls[d] = cls[e];
          break;
        }
  }
  const int64_t distinct = distinct_orderings(cls, options_.enumerate_orderings_up_to);
  std::vector<std::vector<int>> named;
  for (const auto& name : options_.orderings) {
    auto o = device_order(c, name);
    if (std::find(named.begin(), named.end(), o) == named.end())
      named.push_back(std::move(o));
  }
  if (named.empty())
    named.push_back(device_order(c, "memory"));
  // The named orderings first: their best plan bounds (and so prunes) the
  // rest. Micro-batch counts from the largest down: for models planned
  // across many devices the best plan tends to have many micro-batches, so
  // the bound is tight early (ResNet-50 on 32 devices planned 1.4x faster
  // this way than from M = 1 up).
  for (auto it = Ms.rbegin(); it != Ms.rend(); ++it)
    for (const auto& o : named)
      solve(o, *it);
  if (distinct <= options_.enumerate_orderings_up_to) {
    // Few distinct orderings: try them all (each plan is contiguous in some
    // ordering, so only the DP's suffix choice remains a heuristic).
    std::vector<std::vector<int>> orders;
    std::vector<int> seq = cls;
    std::sort(seq.begin(), seq.end());
    do {
      std::vector<int> order;
      std::vector<bool> used(n, false);
      for (int k : seq)
        for (int d = 0; d < n; ++d)
          if (!used[d] && cls[d] == k) {
            used[d] = true;
            order.push_back(d);
            break;
          }
      orders.push_back(std::move(order));
    } while (std::next_permutation(seq.begin(), seq.end()));
    for (auto it = Ms.rbegin(); it != Ms.rend(); ++it)
      for (const auto& o : orders)
        solve(o, *it);
  } else {
    // Local search from the best ordering: swap neighbours of different
    // classes while the round latency drops.
    for (int pass = 0; best.T < inf && pass < options_.local_search_passes; ++pass) {
      bool improved = false;
      for (int k = 0; k + 1 < n; ++k) {
        auto order = best_order;
        if (cls[order[k]] == cls[order[k + 1]])
          continue;
        std::swap(order[k], order[k + 1]);
        improved = solve(order, best_M) || improved;
      }
      if (!improved)
        break;
    }
  }
  if (!(best.T < inf))
    explain_infeasible(profile, t, c, batch_size);
  plan p = std::move(best.best);
  p.planner = "asteroid";
  evaluate(p, t, c);
  check_memory(p, c);
  return p;
}

} // namespace asteroid::planner
