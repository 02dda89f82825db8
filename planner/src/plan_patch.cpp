#include "asteroid/planner/plan_patch.hpp"

#include "asteroid/planner/allocation.hpp"
#include "asteroid/planner/cost_model.hpp"
#include "asteroid/planner/error.hpp"

#include <algorithm>

namespace asteroid::planner {

int backup_device(const plan& p, int stage) {
  const int P = p.num_stages();
  if (P < 2 || stage < 0 || stage >= P)
    return -1;
  int holder = stage + 1 < P ? stage + 1 : stage - 1;
  const auto& devs = p.stages[holder].devices;
  return devs.empty() ? -1 : devs.front();
}

namespace {

std::string join_shares(const std::vector<int64_t>& shares) {
  std::string out;
  for (size_t i = 0; i < shares.size(); ++i)
    out += (i ? ":" : "") + std::to_string(shares[i]);
  return out;
}

std::string join_devices(const std::vector<int>& devices) {
  std::string out;
  for (size_t i = 0; i < devices.size(); ++i)
    out += (i ? "," : "") + std::to_string(devices[i]);
  return out;
}

/// Algorithm 1 for one stage of the patched plan.
std::vector<int64_t> reallocate(const plan& p, int s, const cluster& c,
                                const std::optional<cost_tables>& tables) {
  const auto& st = p.stages[s];
  const auto micro = p.micro_batch_size();
  if (st.devices.size() == 1)
    return {micro};
  if (tables) {
    auto in_flight = in_flight_micro_batches(s, p.num_stages(), p.micro_batches);
    auto a = allocate_stage(*tables, c, st.first_layer, st.end_layer,
                            st.devices, micro, in_flight);
    if (a.feasible)
      return a.shares;
    // Memory says no: fall through to speed shares and let the caller's
    // cost model (check_memory) judge the result.
  }
  std::vector<double> speeds;
  std::vector<int64_t> caps;
  for (int d : st.devices) {
    speeds.push_back(c.devices.at(d).speed);
    caps.push_back(micro);
  }
  auto a = allocate_shares(micro, speeds, caps, [](int64_t y) {
    return std::pair<double, double>{static_cast<double>(y), 0.0};
  });
  return a.shares;
}

} // namespace

plan_patch patch_plan(const plan& p, const std::set<int>& lost,
                      const cluster& c,
                      const std::optional<model_profile>& profile,
                      const patch_options& options) {
  plan_patch out;
  auto& q = out.patched;
  q = p;
  q.predicted_round_s = 0;
  q.predicted_samples_per_s = 0;
  q.simulated_round_s = 0;
  q.simulated_samples_per_s = 0;
  q.predicted_memory_bytes.clear();
  // 1. Drop the lost devices from their groups.
  std::vector<bool> touched(p.stages.size(), false);
  for (size_t s = 0; s < q.stages.size(); ++s) {
    auto& st = q.stages[s];
    std::vector<int> keep, gone;
    std::vector<int64_t> kept_shares;
    int64_t orphaned = 0; // the lost members' shares
    for (size_t i = 0; i < st.devices.size(); ++i) {
      auto share = i < st.shares.size() ? st.shares[i] : 0;
      if (lost.count(st.devices[i])) {
        gone.push_back(st.devices[i]);
        orphaned += share;
      } else {
        keep.push_back(st.devices[i]);
        kept_shares.push_back(share);
      }
    }
    if (!gone.empty()) {
      touched[s] = true;
      out.changes.push_back("stage " + std::to_string(s) + ": lost device "
                            + join_devices(gone)
                            + (keep.empty() ? ", group empty" : ""));
      st.devices = keep;
      if (!options.rebalance && !keep.empty()) {
        kept_shares.front() += orphaned;
        st.shares = kept_shares;
        touched[s] = false; // no new shares: the first survivor takes it all
        out.changes.push_back("stage " + std::to_string(s) + ": devices "
                              + join_devices(keep) + ", shares "
                              + join_shares(kept_shares) + " (not rebalanced)");
      }
    }
  }
  // 2. Merge empty stages into the neighbour holding their replica (or the
  //    other one). Going from the back keeps the original indices valid for
  //    the stages still to visit.
  for (int s = q.num_stages() - 1; s >= 0; --s) {
    if (!q.stages[s].devices.empty())
      continue;
    const int P = q.num_stages();
    if (P == 1)
      throw planner_error("patch: every device of the plan is lost");
    int into = s + 1 < P ? s + 1 : s - 1;
    if (q.stages[into].devices.empty()) {
      int other = into == s + 1 ? s - 1 : s + 1;
      if (other >= 0 && other < P && !q.stages[other].devices.empty())
        into = other;
    }
    auto& dst = q.stages[into];
    auto& src = q.stages[s];
    out.changes.push_back("stage " + std::to_string(s) + " (layers ["
                          + std::to_string(src.first_layer) + ", "
                          + std::to_string(src.end_layer)
                          + ")) merged into stage " + std::to_string(into)
                          + " on devices " + join_devices(dst.devices));
    dst.first_layer = std::min(dst.first_layer, src.first_layer);
    dst.end_layer = std::max(dst.end_layer, src.end_layer);
    touched[into] = options.rebalance; // more layers: shares by Algorithm 1
    q.stages.erase(q.stages.begin() + s);
    touched.erase(touched.begin() + s);
  }
  if (q.stages.empty() || q.stages.front().devices.empty())
    throw planner_error("patch: every device of the plan is lost");
  // 3. New shares where a group changed.
  std::optional<cost_tables> tables;
  if (profile)
    tables.emplace(*profile, q.micro_batch_size());
  for (size_t s = 0; s < q.stages.size(); ++s) {
    if (!touched[s])
      continue;
    auto& st = q.stages[s];
    auto shares = reallocate(q, static_cast<int>(s), c, tables);
    // A survivor Algorithm 1 gives no sample leaves the group (plans have
    // no zero shares); it stays in the cluster, idle.
    std::vector<int> computing, idle;
    std::vector<int64_t> nonzero;
    for (size_t i = 0; i < st.devices.size(); ++i) {
      if (shares[i] > 0) {
        computing.push_back(st.devices[i]);
        nonzero.push_back(shares[i]);
      } else {
        idle.push_back(st.devices[i]);
      }
    }
    st.devices = computing;
    st.shares = nonzero;
    out.changes.push_back("stage " + std::to_string(s) + ": devices "
                          + join_devices(st.devices) + ", shares "
                          + join_shares(st.shares)
                          + (idle.empty() ? "" : " (device " + join_devices(idle)
                                                   + " left idle: no sample)"));
  }
  q.planner = p.planner + "+patch";
  if (profile)
    evaluate(q, *profile, c);
  return out;
}

} // namespace asteroid::planner
