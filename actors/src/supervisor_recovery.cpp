// Supervisor: recovery after losses, re-join, drift, checkpoints.
#include "supervisor.hpp"
#include "message_dispatch.hpp"
#include "supervisor_ask.hpp"

#include "asteroid/actors/node.hpp"
#include "asteroid/actors/remote_probe.hpp"
#include "asteroid/actors/snapshot_store.hpp"
#include "asteroid/actors/stage_state.hpp"
#include "asteroid/planner/cost_model.hpp"
#include "asteroid/planner/json_io.hpp"
#include "asteroid/planner/plan_patch.hpp"
#include "asteroid/planner/planner.hpp"
#include "asteroid/serialization/checkpoint.hpp"
#include "asteroid/training/profiler.hpp"

#include <spdlog/spdlog.h>


namespace asteroid::actors::detail {

// -- recovery -------------------------------------------------------------------------

void supervisor::save_checkpoint(int64_t step, serialization::named_tensors state) {
  serialization::checkpoint ck;
  ck.model_state = std::move(state);
  ck.step = step;
  ck.model_name = job_.model;
  ck.model_options_json = job_.model_options.dump();
  ck.metadata = "asteroid job supervisor: stage states before step "
                + std::to_string(step);
  serialization::save_checkpoint(ft().checkpoint_path, ck);
  checkpoint_step_ = step;
}

state_source supervisor::resume_state(int64_t total_steps) {
  auto ck = serialization::load_checkpoint(job_.resume_from);
  const auto where = "resume: checkpoint '" + job_.resume_from + "'";
  if (ck.model_name != job_.model)
    throw std::invalid_argument(where + " holds model '" + ck.model_name
                                + "', but the job trains '" + job_.model + "'");
  if (ck.model_options_json != job_.model_options.dump())
    throw std::invalid_argument(where + " was written with model options "
                                + ck.model_options_json + ", but the job has "
                                + job_.model_options.dump());
  // A checksum proves the file undamaged, not that its step fits this job:
  // the step indexes the data order.
  if (ck.step < 0 || ck.step > total_steps)
    throw std::invalid_argument(where + " holds step " + std::to_string(ck.step)
                                + ", outside this job's steps 0 to "
                                + std::to_string(total_steps));
  try {
    load_stage_state(model_, 0, static_cast<int>(model_->size()), nullptr,
                     ck.model_state);
  } catch (const std::exception& e) {
    throw std::invalid_argument(where + ": " + e.what());
  }
  state_source src;
  src.version = ck.step;
  src.full = std::move(ck.model_state);
  checkpoint_step_ = ck.step; // written already: not again before a step ran
  return src;
}

void supervisor::drain_losses(int64_t step) {
  // Devices often fail together (a switch, a power strip): take every loss
  // already reported before planning around the first one. Everything else
  // in the mailbox belongs to the generation being replaced. Synced first:
  // messages that came while the driver ran are still in the actor's
  // mailbox, not yet in the inbox.
  inbox_.sync();
  while (inbox_.receive_until(clock::now(), [&](inbox_message& m) {
    dispatch(m.content, [&](caf::down_msg& dm) {
      for (size_t d = 0; d < devices_.size(); ++d)
        if (dm.source == devices_[d].address() && !dead_.count(static_cast<int>(d))) {
          dead_.insert(static_cast<int>(d));
          closed_.insert(static_cast<int>(d));
          fault_event("detected",
                      {{"node", name_of(static_cast<int>(d))},
                       {"step", step},
                       {"reason", "connection closed: " + sys_.render(dm.reason)}},
                      static_cast<int>(d));
        }
    });
    return true;
  }))
    continue;
  // Silent devices the heartbeat monitor gave up on while the supervisor
  // waited for another one (supervisor::ask reports one loss at a time).
  for (int d = 0; d < static_cast<int>(devices_.size()); ++d)
    if (heartbeats_.dead(d) && dead_.insert(d).second)
      fault_event("detected",
                  {{"node", name_of(d)}, {"step", step}, {"reason", silence_reason()}}, d);
}

namespace {

/// The newest version at which the snapshots in `inventories` cover every
/// layer of a `layers`-layer model (-1: none). None newer than `failed_step`
/// counts: it would belong to another job.
int64_t newest_complete_version(const std::map<int, json>& inventories,
                                int layers, int64_t failed_step) {
  std::set<int64_t, std::greater<>> versions;
  json all = json::object();
  for (auto& [d, items] : inventories)
    for (auto& [k, vs] : items.items())
      for (auto& v : vs)
        if (v.is_number_integer() && v.get<int64_t>() <= failed_step) {
          versions.insert(v.get<int64_t>());
          all[k].push_back(v);
        }
  for (auto v : versions)
    if (tiles(all, 0, layers, v))
      return v;
  return -1;
}

} // namespace

int64_t supervisor::recover(const std::set<int>& lost, int64_t failed_step) {
  auto t_begin = clock::now();
  awaiting_resume_ = t_begin;
  if (!catch_up_step_ || failed_step > *catch_up_step_)
    catch_up_step_ = failed_step;
  std::vector<std::string> names;
  for (int d : lost) {
    dead_.insert(d);
    names.push_back(name_of(d));
  }
  // What was in flight where, before the deployment below replaces the
  // micro-batch actors: the interrupted step's work is replayed whole, and
  // this says which of it the loss cut off.
  auto in_flight = micro_batches_in_flight();
  drain_losses(failed_step);
  for (int d : dead_)
    if (!lost.count(d) && !heartbeats_.dead(d))
      heartbeats_.mark_dead(d);
  auto mode = ft().recovery;
  if (mode == "none" || (mode != "restart" && ft().snapshot_every == 0))
    throw std::runtime_error("node " + who(*lost.begin())
                             + " was lost at step " + std::to_string(failed_step)
                             + " and recovery is off");
  // The replicas stay until the deployment decides which of them are kept;
  // whatever they send until then belongs to the generation before. Their
  // devices halt them at their next op, so that a replica that will be kept
  // takes its new spec without first computing the rest of a step that is
  // replayed anyway. A node counted lost whose connection is still open
  // (silent for a while, not gone) is halted too: its replicas would go on
  // computing, and snapshotting, a generation that is over.
  ++generation_;
  for (int d = 0; d < static_cast<int>(devices_.size()); ++d)
    if (!closed_.count(d))
      self_->send(devices_[d], halt_atom::value, int64_t{generation_});
  std::vector<std::string> changes;
  int copied = 0;
  // Planned again, on fewer devices, when one more is lost meanwhile.
  auto make = [&]() -> std::pair<planner::plan, state_source> {
    mode = ft().recovery;
    changes.clear();
    copied = 0;
    fetched_snapshots_ = 0;
    state_source src;
    planner::plan next;
    if (mode == "restart") {
      if (ft().checkpoint_path.empty() || checkpoint_step_ < 0)
        throw std::runtime_error("restart recovery: no checkpoint was written");
      // From scratch, as a restarted job would: profile and plan again.
      if (job_.profile_path.empty())
        profile_.reset();
      auto ck = serialization::load_checkpoint(ft().checkpoint_path);
      // A checksum proves the file undamaged, not that it is this job's:
      // a step from elsewhere would index the data order out of range.
      if (ck.step != checkpoint_step_ || ck.model_name != job_.model)
        throw std::runtime_error(
          "restart recovery: " + ft().checkpoint_path + " holds model '"
          + ck.model_name + "' at step " + std::to_string(ck.step)
          + ", but this job wrote '" + job_.model + "' at step "
          + std::to_string(checkpoint_step_) + " there");
      src.version = ck.step;
      src.full = std::move(ck.model_state);
      next = fresh_plan_on_survivors();
    } else {
      src.inventories = inventories();
      src.version = newest_complete_version(
        src.inventories, static_cast<int>(model_->size()), failed_step);
      if (src.version < 0) {
        std::vector<std::string> gone;
        for (int d : dead_)
          gone.push_back(name_of(d));
        throw std::runtime_error("cannot recover from the loss of "
                                 + json(gone).dump()
                                 + ": no live device holds a replica of every "
                                   "layer");
      }
      if (mode == "replay" || mode == "replay_no_rebalance") {
        // replay_no_rebalance is the Figure-17 baseline: nobody re-schedules
        // the lost work, and no threshold swaps in a better plan.
        if (plan_around_dead(mode == "replay", next, changes))
          mode = "replan(threshold)";
      } else {
        next = fresh_plan_on_survivors();
      }
      copied = state_from_snapshots(next, src);
    }
    check_plan_fits(next, model_, job_.model, static_cast<int>(devices_.size()));
    inject_faults_when("recovery", failed_step);
    return {next, src};
  };
  auto src = deploy_surviving(make, failed_step);
  names.clear();
  for (int d : dead_)
    if (!reported_lost_.count(d)) {
      names.push_back(name_of(d));
      reported_lost_.insert(d);
    }
  fault_event("recovered",
              {{"mode", mode},
               {"lost", names},
               {"failed_step", failed_step},
               {"resume_step", src.version},
               {"replayed_steps", failed_step - src.version},
               {"copied_snapshots", copied},
               {"states_sent", states_sent_},
               {"fetched_snapshots", fetched_snapshots_},
               {"recover_s", seconds_between(t_begin, clock::now())},
               {"stages", plan_.num_stages()},
               {"plan", json(plan_)},
               {"kept", kept_},
               {"stage_actors", stage_actors_record_},
               {"in_flight", in_flight},
               // How stale in_flight may be: passes of the last 2N ms (0:
               // since each replica's last wait) may not have reached it.
               {"micro_batch_report_ms", job_.micro_batch_report_ms},
               {"changes", changes}});
  return src.version;
}

bool supervisor::plan_around_dead(bool rebalance, planner::plan& next,
                                  std::vector<std::string>& changes) {
  auto prof = known_profile();
  planner::patch_options how;
  how.rebalance = rebalance;
  auto patch = planner::patch_plan(plan_, dead_, full_cluster(), prof, how);
  next = patch.patched;
  changes = patch.changes;
  if (!prof || !rebalance)
    return false;
  auto fresh = fresh_plan_on_survivors();
  if (next.predicted_round_s <= ft().replan_threshold * fresh.predicted_round_s
      && planner::fits_memory(next, full_cluster()))
    return false;
  changes.push_back("patched plan predicted " + std::to_string(next.predicted_round_s)
                    + " s per round vs fresh "
                    + std::to_string(fresh.predicted_round_s)
                    + " s: heavy re-plan instead");
  next = fresh;
  return true;
}

bool supervisor::snapshots_at(int64_t step, state_source& src) {
  if (!snapshots_on() || step % ft().snapshot_every != 0 || !job_.data_plane)
    return false;
  // The replicas snapshot a step's state after they report the step before
  // (stage_executor.cpp), so the last of them may still be on its way.
  const int L = static_cast<int>(model_->size());
  const auto timeout = milliseconds(job_.step_timeout_ms);
  const auto deadline = clock::now() + timeout;
  for (;;) {
    // Asked one at a time with ask(), which keeps heartbeats going and
    // leaves other messages (a path report) for the steps.
    std::map<int, json> inv;
    try {
      for (int d = 0; d < static_cast<int>(devices_.size()); ++d) {
        if (dead_.count(d))
          continue;
        auto reply = ask<inventory_atom, int32_t, std::string>(
          d, devices_[d], timeout, "asking node " + who(d) + " for its snapshots",
          inventory_atom::value, static_cast<int32_t>(d));
        auto items = json::parse(reply.get_as<std::string>(2), nullptr, false);
        if (!items.is_discarded())
          inv[d] = std::move(items);
      }
    } catch (const device_lost& e) {
      // Planned without it; the others' snapshots may still hold it all.
      mark_lost(e.device, "lost_during_recovery", {{"step", step}, {"reason", e.what()}});
      continue;
    }
    // Every layer, and each running replica's own range on its node (its
    // home snapshot): one still under way would otherwise be copied there
    // for nothing.
    bool complete = newest_complete_version(inv, L, step) == step;
    for (size_t s = 0; complete && s < stages_.size() && s < plan_.stages.size(); ++s)
      for (auto& r : stages_[s])
        if (complete && !dead_.count(r.device))
          complete = tiles(inv[r.device], plan_.stages[s].first_layer,
                           plan_.stages[s].end_layer, step);
    if (complete) {
      src.inventories = std::move(inv);
      return true;
    }
    if (clock::now() >= deadline)
      return false;
    inbox_.pause(milliseconds(20));
  }
}

state_source supervisor::boundary_state(const planner::plan& next, const state_source& src,
                                        bool from_snapshots, int& copied) {
  if (!from_snapshots)
    return src;
  // Planned again after a loss: nothing is asked of a lost device.
  state_source here = src;
  for (int d : dead_)
    here.inventories.erase(d);
  copied = state_from_snapshots(next, here);
  return here;
}

void supervisor::replan_at_boundary(int64_t step, const std::string& event,
                                    json rec) {
  auto t_begin = clock::now();
  enter(job_state::recovering);
  // The state after the last completed step: the nodes' snapshots of it
  // where they hold all of it (copied from node to node where a member
  // needs it elsewhere), else straight from the replicas, through this
  // process.
  state_source src;
  src.version = step;
  const bool from_snapshots = snapshots_at(step, src);
  if (!from_snapshots)
    src.full = gather_full_state();
  ++generation_;
  int copied = 0;
  deploy_surviving(
    [&]() -> std::pair<planner::plan, state_source> {
      auto next = fresh_plan_on_survivors();
      auto state = boundary_state(next, src, from_snapshots, copied);
      return {std::move(next), std::move(state)};
    },
    step);
  rec["state_from"] = from_snapshots ? "snapshots" : "replicas";
  rec["copied_snapshots"] = copied;
  rec["states_sent"] = states_sent_;
  rec["step"] = step;
  rec["recover_s"] = seconds_between(t_begin, clock::now());
  rec["plan"] = json(plan_);
  rec["kept"] = kept_;
  rec["stage_actors"] = stage_actors_record_;
  fault_event(event, rec);
  enter(job_state::running);
}

void supervisor::reconnect_closed() {
  // A node whose process went away may be restarted at the same endpoint
  // (or replaced by a new device there). Trying costs one refused TCP
  // connect per second and device; a node that answers is linked to the
  // others and admitted like one that came back from a hang.
  auto now = clock::now();
  if (closed_.empty() || now < next_reconnect_)
    return;
  next_reconnect_ = now + std::chrono::seconds(1);
  for (int d : std::set<int>(closed_)) {
    if (!dead_.count(d) || removed_.count(d)
        || d >= static_cast<int>(nodes_.size()))
      continue;
    device_actor handle;
    try {
      auto [host, port] = parse_endpoint(nodes_[d]);
      inbox_.run_aside([&] { handle = connect_device(sys_, host, port, milliseconds(300)); });
    } catch (const std::exception&) {
      continue; // not back yet
    }
    std::string text;
    try {
      text = exchange<std::string>(handle, heartbeats_.tolerance(), "capabilities",
                                   caps_atom::value)
               .get_as<std::string>(0);
    } catch (const std::runtime_error&) {
      continue;
    }
    // A new process serves no job yet; one serving another job stays out
    // (asked again a second later).
    if (auto refused = claim(handle, nodes_[d]); !refused.empty()) {
      spdlog::warn("{}", refused);
      continue;
    }
    claimed_.insert(d);
    devices_[d] = handle;
    self_->monitor(handle);
    caps_[d] = json::parse(text);
    // Direct links between the new process and every live node.
    bool linked = true;
    for (size_t e = 0; e < devices_.size(); ++e)
      if (static_cast<int>(e) != d && !dead_.count(static_cast<int>(e)))
        linked = linked && link(devices_[d], nodes_[e]).empty()
                 && link(devices_[e], nodes_[d]).empty();
    if (!linked)
      continue;
    closed_.erase(d);
    returned_.insert(d);
    fault_event("reconnected", {{"node", name_of(d)},
                                {"pid", caps_[d].value("pid", int64_t{-1})}}, d);
  }
}

bool supervisor::rejoin(int64_t step, bool admit) {
  // A device that answers again is admitted at this mini-batch boundary.
  if (snapshots_on() && can_plan())
    reconnect_closed();
  // Without snapshots or a planner nobody is admitted; the devices stay in
  // returned_, so "answering_again" is reported once, not every round.
  // Nor while a step runs ahead: a re-plan takes the weights between two
  // steps, and the next start is held back until returned_ is empty.
  if (!admit || !snapshots_on() || !can_plan())
    return false;
  std::set<int> back;
  for (int d : returned_)
    if (dead_.count(d))
      back.insert(d);
  returned_.clear();
  if (back.empty())
    return false;
  std::vector<std::string> names;
  for (int d : back) {
    dead_.erase(d);
    heartbeats_.revive(d, clock::now());
    names.push_back(name_of(d));
  }
  replan_at_boundary(step, "rejoined", {{"nodes", names}});
  return true;
}

bool supervisor::track_speed(int64_t step, const std::vector<json>& reports) {
  // FTPipeHD-style: a device whose compute time per step drifts from what
  // it took right after this deployment (same work, same shares) by more
  // than drift_factor for drift_steps steps in a row gets its speed
  // rescaled and the job is re-planned. Relative to its own baseline, so
  // profiling error and host noise that were there from the start do not
  // count as drift.
  if (!drift_tracking_on())
    return false;
  std::map<int, double> busy;
  for (auto& rep : reports) {
    int s = rep["stage"], r = rep["replica"];
    busy[stages_[s][r].device] += rep["busy_s"].get<double>();
  }
  int drifted = -1;
  double ratio = 1.0;
  for (auto& [d, b] : busy) {
    auto& t = speed_track_[d];
    if (t.generation != generation_)
      t = {generation_, 0, {}, 0};
    // The first steps of a deployment warm up (allocator, kernel choice):
    // skip two, then the next three are the baseline.
    if (++t.seen <= 2)
      continue;
    if (t.baseline.size() < 3) {
      t.baseline.push_back(b);
      continue;
    }
    auto base = t.baseline;
    std::sort(base.begin(), base.end());
    double r = b / std::max(base[1], 1e-9);
    // Slower counts always. Faster counts only for a device already marked
    // slow (it recovers): otherwise a baseline taken while the process was
    // still warming up (heap growth, caches) would pass for drift.
    bool off = r > ft().drift_factor
               || (r < 1.0 / ft().drift_factor && speed_scale_[d] < 1.0);
    t.streak = off ? t.streak + 1 : 0;
    if (t.streak >= ft().drift_steps && drifted < 0) {
      drifted = d;
      ratio = r;
    }
  }
  if (drifted < 0)
    return false;
  speed_scale_[drifted] /= ratio;
  replan_at_boundary(step, "drift",
                     {{"node", name_of(drifted)},
                      {"busy_ratio", ratio},
                      {"speed_scale", speed_scale_[drifted]}});
  return true;
}

bool supervisor::track_memory(int64_t step, const std::vector<json>& reports) {
  // A node's budget is for what its jobs add to the process (weights,
  // optimizer state, activations in flight, buffers); the planner predicts
  // that, but not autograd's inner stash, allocator slack or another
  // tenant's memory. A node whose measured peak above its baseline exceeds
  // the budget is treated like one that slowed down: the planner sees its
  // budget shrunk by the overshoot and plans again. The peak is a high-water
  // mark and stays, so the same overshoot never triggers twice; a peak that
  // grows 10 % past the last trigger does.
  if (!memory_tracking_on())
    return false;
  int over = -1;
  int64_t peak = 0, budget = 0;
  for (const auto& rep : reports) {
    int s = rep["stage"], r = rep["replica"];
    int d = stages_[s][r].device;
    auto p = rep.value("job_peak_bytes", int64_t{-1});
    auto b = rep.value("memory_budget_bytes", int64_t{-1});
    auto last = over_budget_peak_.count(d) ? over_budget_peak_[d] : int64_t{0};
    if (b > 0 && p > b && static_cast<double>(p) > 1.1 * static_cast<double>(last)) {
      over = d;
      peak = p;
      budget = b;
      break;
    }
  }
  if (over < 0) {
    memory_replan_due_ = false;
    return false;
  }
  if (started_ahead(step)) {
    memory_replan_due_ = true; // the next boundary decides, with nothing ahead
    return false;
  }
  memory_replan_due_ = false;
  over_budget_peak_[over] = peak;
  memory_scale_[over] *= static_cast<double>(budget) / static_cast<double>(peak);
  replan_at_boundary(step, "over_budget",
                     {{"node", name_of(over)},
                      {"peak_bytes", peak},
                      {"budget_bytes", budget},
                      {"planning_budget_bytes",
                       static_cast<int64_t>(static_cast<double>(budget)
                                            * memory_scale_[over])}});
  return true;
}

} // namespace asteroid::actors::detail
