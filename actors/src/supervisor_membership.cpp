// Supervisor: devices the program removes from the job or adds to it by
// message (supervisor_actor.hpp: ast_jdrop, ast_jadd), at a step boundary.
#include "supervisor.hpp"
#include "supervisor_ask.hpp"

#include "asteroid/actors/node.hpp"
#include "asteroid/actors/node_capabilities.hpp"
#include "asteroid/actors/remote_probe.hpp"
#include "asteroid/planner/json_io.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace asteroid::actors::detail {

bool supervisor::remove_requested(int64_t step) {
  if (!control_)
    return false;
  std::set<int> leaving;
  std::vector<std::string> names;
  for (int d : control_->take_removals()) {
    if (d < 0 || d >= static_cast<int>(devices_.size()) || removed_.count(d))
      continue;
    if (dead_.count(d)) { // lost already: only never admitted again
      removed_.insert(d);
      cut_paths_.forget(d);
      returned_.erase(d);
      closed_.erase(d);
      continue;
    }
    leaving.insert(d);
    names.push_back(name_of(d));
  }
  if (leaving.empty())
    return false;
  if (dead_.size() + leaving.size() >= devices_.size()) {
    fault_event("remove_refused",
                {{"step", step}, {"nodes", names},
                 {"reason", "no device would be left to train on"}});
    return false;
  }
  auto t_begin = clock::now();
  enter(job_state::recovering);
  for (int d : leaving) {
    removed_.insert(d);
    dead_.insert(d);
    reported_lost_.insert(d); // removed, not lost: no later "lost" names it
    if (!heartbeats_.dead(d))
      heartbeats_.mark_dead(d);
    self_->demonitor(devices_[d]->address());
  }
  // The state after the last completed step: the staying nodes' snapshots
  // of it where they hold all of it (as at any boundary re-plan), else
  // from the replicas (the leaving device's too: nothing is lost).
  state_source src;
  src.version = step;
  const bool from_snapshots = snapshots_at(step, src);
  if (!from_snapshots)
    src.full = gather_full_state();
  ++generation_;
  std::vector<std::string> changes;
  std::string mode = "patch";
  int copied = 0;
  deploy_surviving(
    [&]() -> std::pair<planner::plan, state_source> {
      planner::plan next;
      mode = plan_around_dead(ft().recovery != "replay_no_rebalance", next, changes)
               ? "replan(threshold)"
               : "patch";
      check_plan_fits(next, model_, job_.model, static_cast<int>(devices_.size()));
      auto state = boundary_state(next, src, from_snapshots, copied);
      return {std::move(next), std::move(state)};
    },
    step);
  // The node stays up for other jobs; this job's snapshots leave with it.
  for (int d : leaving) {
    self_->send(devices_[d], release_atom::value, job_id_);
    claimed_.erase(d);
  }
  fault_event("removed", {{"step", step},
                          {"nodes", names},
                          {"mode", mode},
                          {"state_from", from_snapshots ? "snapshots" : "replicas"},
                          {"copied_snapshots", copied},
                          {"states_sent", states_sent_},
                          {"recover_s", seconds_between(t_begin, clock::now())},
                          {"stages", plan_.num_stages()},
                          {"plan", json(plan_)},
                          {"kept", kept_},
                          {"stage_actors", stage_actors_record_},
                          {"changes", changes}});
  enter(job_state::running);
  return true;
}

std::string supervisor::link(const device_actor& from, const std::string& to) {
  std::string error;
  try {
    auto [host, port] = parse_endpoint(to);
    error = exchange<std::string>(from, heartbeats_.tolerance() + std::chrono::seconds(5),
                                  "linking to " + to, link_atom::value, host, port)
              .get_as<std::string>(0);
  } catch (const std::exception& e) {
    error = e.what();
  }
  return error;
}

namespace {

/// Links between a node being added and the job's live nodes, measured
/// before it joins (a node whose links cannot be measured is not added).
struct added_links {
  std::vector<link_measurement> out; ///< new node -> device e
  std::vector<link_measurement> in;  ///< device e -> new node
};

} // namespace

bool supervisor::add_requested(int64_t step) {
  if (!control_ || !control_->additions_pending())
    return false;
  std::vector<int> added;
  std::vector<std::string> names;
  const auto timeout = milliseconds(job_.connect_timeout_ms);
  for (const auto& endpoint : control_->take_additions()) {
    auto refuse = [&](const std::string& why) {
      fault_event("add_refused",
                  {{"step", step}, {"endpoint", endpoint}, {"reason", why}});
    };
    if (!can_plan()) {
      refuse("the job runs a fixed plan and has no planner or profile to plan "
             "with another device");
      continue;
    }
    if (nodes_.size() != devices_.size()) {
      refuse("the job's devices have no endpoints (in-process devices): nodes "
             "can be added only to a job on nodes");
      continue;
    }
    if (std::find(nodes_.begin(), nodes_.end(), endpoint) != nodes_.end()) {
      refuse("already one of the job's nodes");
      continue;
    }
    device_actor handle;
    json caps;
    try {
      auto [host, port] = parse_endpoint(endpoint);
      inbox_.run_aside([&] { handle = connect_device(sys_, host, port, timeout); });
      auto text = exchange<std::string>(handle, timeout, "no capabilities", caps_atom::value)
                    .get_as<std::string>(0);
      caps = json::parse(text, nullptr, false);
      if (!caps.is_object())
        throw std::runtime_error("its capabilities are not a JSON object");
    } catch (const std::exception& e) {
      refuse(e.what());
      continue;
    }
    // Claimed before the probes: the job's nodes take echoes of this job only.
    if (auto err = claim(handle, endpoint); !err.empty()) {
      refuse(err);
      continue;
    }
    // Direct links both ways with every live node, and their speeds where
    // the planner sees measured links, before the node counts as one of the
    // job's: a node that fails here is left out whole.
    const auto n = devices_.size();
    added_links measured;
    measured.out.resize(n);
    measured.in.resize(n);
    std::string problem;
    for (size_t e = 0; e < n && problem.empty(); ++e) {
      if (dead_.count(static_cast<int>(e)))
        continue;
      problem = link(handle, nodes_[e]);
      if (problem.empty())
        problem = link(devices_[e], endpoint);
      if (problem.empty() && links_)
        try {
          link_probe_options lp;
          lp.timeout = timeout + std::chrono::seconds(5);
          inbox_.run_aside([&] {
            measured.out[e] = measure_link(sys_, handle, nodes_[e], lp);
            measured.in[e] = measure_link(sys_, devices_[e], endpoint, lp);
          });
        } catch (const std::exception& x) {
          problem = x.what();
        }
    }
    if (!problem.empty()) {
      self_->send(handle, release_atom::value, job_id_);
      refuse("cannot link it with the job's nodes: " + problem);
      continue;
    }
    const int d = heartbeats_.add_device(clock::now());
    devices_.push_back(handle);
    caps_.push_back(caps);
    nodes_.push_back(endpoint);
    speed_scale_.push_back(1.0);
    memory_scale_.push_back(1.0);
    self_->monitor(handle);
    claimed_.insert(d);
    if (links_) {
      // Speeds relative to where the profile was taken, as at the start.
      const double reference = reference_slowdown();
      auto& c = *links_;
      auto one = planner::cluster::uniform(
        "added", {{name_of(d), "measured", reference / caps.value("slowdown", 1.0),
                   plannable_memory_bytes(caps), endpoint}},
        1e9);
      c.devices.push_back(one.devices[0]);
      // Links to devices that are dead stay at the default (1 Gbit/s): no
      // plan on the survivors uses them.
      for (size_t e = 0; e < n; ++e) {
        bool live = !dead_.count(static_cast<int>(e));
        c.bandwidth_Bps[e].push_back(live ? measured.in[e].bandwidth_Bps
                                          : one.bandwidth_Bps[0][0]);
        c.latency_s[e].push_back(live ? measured.in[e].latency_s : 0.0);
      }
      c.bandwidth_Bps.emplace_back();
      c.latency_s.emplace_back();
      for (size_t e = 0; e < n; ++e) {
        bool live = !dead_.count(static_cast<int>(e));
        c.bandwidth_Bps[n].push_back(live ? measured.out[e].bandwidth_Bps
                                          : one.bandwidth_Bps[0][0]);
        c.latency_s[n].push_back(live ? measured.out[e].latency_s : 0.0);
      }
      c.bandwidth_Bps[n].push_back(one.bandwidth_Bps[0][0]);
      c.latency_s[n].push_back(one.latency_s[0][0]);
    }
    trace_.process_names[d] = name_of(d);
    trace_.thread_names[{d, 999}] = "faults";
    added.push_back(d);
    names.push_back(name_of(d));
  }
  if (added.empty())
    return false;
  replan_at_boundary(step, "added", {{"nodes", names}, {"devices", added}});
  return true;
}

} // namespace asteroid::actors::detail
