// Supervisor: links between nodes, deployment of a plan, snapshots and state.
#include "supervisor.hpp"
#include "message_dispatch.hpp"
#include "supervisor_ask.hpp"

#include "asteroid/actors/data_plane.hpp"

#include "asteroid/actors/node.hpp"
#include "asteroid/actors/remote_probe.hpp"
#include "asteroid/actors/replica.hpp"
#include "asteroid/actors/snapshot_store.hpp"
#include "asteroid/actors/stage.hpp"
#include "asteroid/actors/stage_state.hpp"
#include "asteroid/actors/state_uploads.hpp"
#include "asteroid/planner/cost_model.hpp"
#include "asteroid/planner/json_io.hpp"
#include "asteroid/planner/plan_patch.hpp"
#include "asteroid/planner/planner.hpp"
#include "asteroid/planner/schedule.hpp"
#include "asteroid/planner/schedule_check.hpp"
#include "asteroid/serialization/checkpoint.hpp"
#include "asteroid/training/profiler.hpp"

#include <spdlog/spdlog.h>


namespace asteroid::actors::detail {

// -- deployment --------------------------------------------------------------------

std::pair<int, std::string> supervisor::device_down(const caf::down_msg& dm) {
  for (size_t d = 0; d < devices_.size(); ++d)
    if (dm.source == devices_[d].address()) {
      closed_.insert(static_cast<int>(d));
      return {static_cast<int>(d), "connection closed: " + sys_.render(dm.reason)};
    }
  for (auto& st : stages_)
    for (auto& r : st)
      if (dm.source == r.handle.address())
        return {r.device, "replica s" + std::to_string(r.stage) + "r"
                            + std::to_string(r.replica) + " went down: "
                            + sys_.render(dm.reason)};
  return {-1, {}};
}

void supervisor::hold_unreachable(const caf::strong_actor_ptr& reporter,
                                  const std::string& endpoint, const std::string& why) {
  int from = -1, to = -1;
  for (size_t d = 0; d < devices_.size(); ++d) {
    if (reporter && reporter == caf::actor_cast<caf::strong_actor_ptr>(devices_[d]))
      from = static_cast<int>(d);
    if (!endpoint.empty() && data_endpoint(static_cast<int>(d)) == endpoint)
      to = static_cast<int>(d);
  }
  unreachable_.hold(from, to, why, dead_);
}

std::optional<unreachable_reports::loss> supervisor::judge_unreachable(clock::time_point now) {
  const auto lately = milliseconds(2 * ft().heartbeat_ms);
  return unreachable_.judge(
    dead_, [&](int d) { return now - heartbeats_.last_answer(d) <= lately; },
    [&](int d) { return name_of(d); });
}

void supervisor::settle_abandoned(int64_t step) {
  auto deadline = clock::now() + milliseconds(job_.connect_timeout_ms)
                  + std::chrono::seconds(30);
  auto pending = [&] {
    for (auto& [d, n] : abandoned_)
      if (n > 0 && !dead_.count(d))
        return true;
    return false;
  };
  while (pending()) {
    auto left = std::chrono::duration_cast<milliseconds>(deadline - clock::now());
    if (left.count() <= 0) {
      spdlog::warn("gave up waiting for replies to interrupted deployments");
      break;
    }
    inbox_.receive_until(deadline, [&](inbox_message& m) {
      if (dispatch(m.content, [&](caf::down_msg& dm) {
            auto [d, why] = device_down(dm);
            if (d < 0 || dead_.count(d))
              return;
            mark_lost(d, "lost_during_deployment", {{"step", step}, {"reason", why}});
          }))
        return true;
      // Replies to fetches (the shape ask() waits for); stage actors
      // settle their own nodes' late deploy replies.
      int from = -1;
      for (auto& [d, n] : abandoned_)
        if (n > 0 && m.sender == caf::actor_cast<caf::strong_actor_ptr>(devices_[d]))
          from = d;
      if (from < 0 || !m.content.match_elements<std::string, std::string, int64_t>())
        return false;
      --abandoned_[from];
      return true;
    });
  }
  abandoned_.clear();
}

void supervisor::mark_lost(int d, const std::string& event, json rec) {
  dead_.insert(d);
  if (!heartbeats_.dead(d))
    heartbeats_.mark_dead(d);
  rec["node"] = name_of(d);
  if (injected_at_.count(d))
    rec["detect_s"] = seconds_between(injected_at_[d], clock::now());
  fault_event(event, std::move(rec), d);
}

state_source supervisor::deploy_surviving(
  const std::function<std::pair<planner::plan, state_source>()>& make,
  int64_t step) {
  // Each loss adds to dead_, so this ends: deployed, or `make` finds too
  // few survivors (or no replica of some layer) and throws.
  for (;;) {
    // The loss is handled after its catch block: the waits below must not
    // happen while an exception is being handled (fiber_inbox.hpp).
    std::optional<std::pair<int, std::string>> lost;
    try {
      auto [next, src] = make();
      deploy(next, src);
      plan_ = next;
      return src;
    } catch (const device_lost& e) {
      lost.emplace(e.device, e.what());
    }
    ++generation_; // what the half-deployed replicas still send is stale
    mark_lost(lost->first, "lost_during_deployment",
              {{"step", step}, {"reason", lost->second}});
    stop_replicas(); // after mark_lost: no stage actor waits on that device
    settle_abandoned(step);
    drain_losses(step);
  }
}

void supervisor::link_nodes() {
  auto timeout = milliseconds(job_.connect_timeout_ms) + std::chrono::seconds(5);
  for (size_t d = 0; d < devices_.size(); ++d)
    for (size_t e = 0; e < devices_.size(); ++e) {
      if (d == e || e >= nodes_.size() || d >= nodes_.size())
        continue;
      auto [host, port] = parse_endpoint(nodes_[e]);
      std::string err;
      try {
        err = exchange<std::string>(devices_[d], timeout, "linking", link_atom::value,
                                    host, port)
                .get_as<std::string>(0);
      } catch (const std::runtime_error& x) {
        err = x.what();
      }
      if (!err.empty())
        throw std::runtime_error("node " + who(static_cast<int>(d))
                                 + " cannot reach node "
                                 + who(static_cast<int>(e)) + ": " + err);
    }
}

void supervisor::claim_nodes() {
  // A job that just ended in another program may still be releasing a
  // node (its release, or its connection closing, races this claim): a
  // refusal is asked again for a short while before it counts.
  const auto patience = std::chrono::seconds(2);
  for (size_t d = 0; d < devices_.size(); ++d) {
    const auto until = clock::now() + patience;
    auto err = claim(devices_[d], who(static_cast<int>(d)));
    while (!err.empty() && clock::now() < until) {
      inbox_.pause(std::chrono::milliseconds(100));
      err = claim(devices_[d], who(static_cast<int>(d)));
    }
    if (!err.empty()) {
      release_nodes(); // the ones claimed already
      throw std::runtime_error(err);
    }
    claimed_.insert(static_cast<int>(d));
  }
}

std::string supervisor::claim(const device_actor& handle, const std::string& who) {
  auto timeout = milliseconds(job_.connect_timeout_ms);
  int64_t bytes = 0;
  std::string err;
  try {
    auto reply = exchange<std::string, int64_t>(handle, timeout, "claiming it",
                                                claim_atom::value, job_id_, last_step_,
                                                path_window_ms(job_.fault_tolerance));
    err = reply.get_as<std::string>(0);
    bytes = reply.get_as<int64_t>(1);
  } catch (const std::runtime_error& e) {
    err = e.what();
  }
  if (!err.empty())
    return "node " + who + " cannot serve this job: " + err;
  if (bytes > 0)
    spdlog::info("node {}: dropped {} bytes of snapshots of an earlier job",
                 who, bytes);
  return {};
}

void supervisor::release_nodes() {
  // Lost devices are not asked: if one comes back, the claim ends when it
  // sees this supervisor go.
  for (int d : claimed_)
    if (!dead_.count(d))
      self_->send(devices_[d], release_atom::value, job_id_);
  claimed_.clear();
}

std::optional<replica_ref> supervisor::keepable(const planner::stage_plan& st, int d,
                                                const state_source& src) const {
  // The checkpoint baseline restarts from scratch; a first deployment has
  // nothing running.
  if (src.version < 0 || ft().recovery == "restart" || dead_.count(d))
    return std::nullopt;
  // A replica that must roll back does so from its own node's snapshots.
  if (!src.inventories.empty()) {
    auto inv = src.inventories.find(d);
    if (inv == src.inventories.end()
        || !tiles(inv->second, st.first_layer, st.end_layer, src.version))
      return std::nullopt;
  }
  for (size_t s = 0; s < stages_.size(); ++s) {
    if (s >= plan_.stages.size()
        || plan_.stages[s].first_layer != st.first_layer
        || plan_.stages[s].end_layer != st.end_layer)
      continue;
    for (auto& r : stages_[s])
      if (r.device == d && r.handle)
        return r;
  }
  return std::nullopt;
}

void supervisor::deploy(const planner::plan& p, const state_source& src) {
  fed_step_.reset(); // new replicas hold no loads
  stop_micro_batches(); // the steps they tracked are fed again
  const auto P = p.num_stages();
  // Which running replicas may stay: their device survived and keeps their
  // layers (their stage actor keeps them: same actor, same state).
  std::vector<std::vector<bool>> keep(P);
  std::set<caf::actor_addr> staying;
  for (int s = 0; s < P; ++s)
    for (auto d : p.stages[s].devices) {
      auto kept = keepable(p.stages[s], d, src);
      keep[s].push_back(kept && staying.insert(kept->handle.address()).second);
    }
  // The supervisor watches replicas to tell a lost device (device_down);
  // while their stage actors stop or rebuild some, it must not take that
  // for a loss. The deployed replicas are watched again at the end.
  for (auto& st : stages_)
    for (auto& r : st)
      if (r.handle)
        self_->demonitor(r.handle.address());
  // One stage actor per layer range: a range the new plan keeps keeps its
  // actor (and the group it owns); the others stop, and their replicas
  // with them, before anything new is built.
  std::map<std::pair<int, int>, stage_actor> actors;
  for (auto& st : p.stages) {
    auto range = std::make_pair(st.first_layer, st.end_layer);
    auto it = stage_actors_.find(range);
    if (it != stage_actors_.end()) {
      actors.emplace(range, it->second);
      stage_actors_.erase(it);
    }
  }
  for (auto& [range, a] : stage_actors_)
    self_->send(a, stop_atom::value);
  stage_actors_.clear();
  stage_actors_record_ = json::array();
  for (int s = 0; s < P; ++s) {
    auto range = std::make_pair(p.stages[s].first_layer, p.stages[s].end_layer);
    bool reused = actors.count(range) > 0;
    if (!reused)
      actors.emplace(range, spawn_stage(sys_, s, range.first, range.second));
    stage_actors_record_.push_back(
      {{"stage", s},
       {"layers", range_key(range.first, range.second)},
       {"actor", static_cast<int64_t>(actors.at(range).id())},
       {"reused", reused}});
  }
  // From here stop_replicas() reaches every replica of this deployment,
  // kept or built, whatever interrupts it: the stage actors own them.
  stage_actors_ = actors;
  stages_.assign(P, {});
  for (int s = 0; s < P; ++s)
    for (size_t r = 0; r < p.stages[s].devices.size(); ++r)
      stages_[s].push_back({s, static_cast<int>(r), p.stages[s].devices[r], replica_actor{}, {}});
  kept_.clear();
  num_replicas_ = 0;
  auto window = job_.credit_window > 0 ? job_.credit_window : P + 1;
  auto timeout = milliseconds(job_.connect_timeout_ms) + std::chrono::seconds(30);
  // A node builds one replica at a time, so a build waits for those queued
  // before it on the same node.
  std::map<int, int> builds_on;
  for (auto& st : p.stages)
    for (auto d : st.devices)
      ++builds_on[d];
  int most_builds = 0;
  for (auto& [d, n] : builds_on)
    most_builds = std::max(most_builds, n);
  // Every replica's instructions, compiled and proven deadlock-free once per
  // deployment; a replica executes what it is shipped.
  auto streams = planner::compile_schedule(p, planner::find_schedule(job_.schedule));
  planner::check_schedule(streams, p.micro_batches);
  size_t next_stream = 0;
  // Each stage's state from this process, encoded once, for the members
  // whose nodes do not hold it: sent as data-plane frames first, shipped
  // by the stage actors to those it did not reach.
  std::vector<std::optional<std::string>> encoded(P);
  auto state_of = [&](int s) -> const std::string& {
    if (!encoded[s]) {
      const auto& st = p.stages[s];
      encoded[s] = serialization::encode_tensors(
        src.version < 0
          ? capture_stage_state(model_, st.first_layer, st.end_layer, nullptr)
          : select_stage_state(model_, st.first_layer, st.end_layer, src.full));
    }
    return *encoded[s];
  };
  // A first deployment's state is the one before its first step.
  const int64_t sent_version = std::max<int64_t>(src.version, 0);
  const auto sent = send_states(p, src, sent_version, keep, state_of,
                                timeout * (most_builds + 1));
  states_sent_ = 0;
  // Which links carry float32 although the job compresses (its
  // "below_mbps"): the planner priced each link by the same rule.
  const auto links = full_cluster();
  const bool by_rate = links.compress_below_Bps > 0.0;
  auto plain = [&](int a, int b) { return by_rate && (a == b || !links.compressed(a, b)); };
  auto plain_of = [&](int d, const std::vector<int>& peers) {
    std::vector<int> out;
    for (size_t q = 0; q < peers.size(); ++q)
      if (plain(d, peers[q]))
        out.push_back(static_cast<int>(q));
    return out;
  };
  for (int s = 0; s < P; ++s) {
    const auto& st = p.stages[s];
    // Every replica of the stage computes the same layers: one range profile.
    std::optional<planner::layer_profile> emulated;
    if (job_.compute_time == "profile") {
      emulated = planner::range_profile(profile(), st.first_layer, st.end_layer);
      // A replica pads to its own slowdown times these: the times of a
      // profile taken on a slowed node are that node's, not speed 1's (the
      // planner's speeds are relative to it alike: reported_cluster).
      for (auto* times : {&emulated->forward_s, &emulated->backward_s})
        for (auto& t : *times)
          t /= reference_slowdown();
    }
    stage_deployment dep;
    dep.stage = s;
    dep.first_layer = st.first_layer;
    dep.end_layer = st.end_layer;
    dep.version = src.version;
    std::vector<caf::actor> member_devices;
    bool ships = false;
    // A ring rounds its reduced chunks alike on every member: compressed as
    // a whole when any link in it is.
    bool ring_plain = true;
    for (int a : st.devices)
      for (int b : st.devices)
        ring_plain = ring_plain && plain(a, b);
    for (size_t r = 0; r < st.devices.size(); ++r) {
      replica_spec spec;
      spec.model = job_.model;
      spec.model_options = job_.model_options;
      spec.stage = s;
      spec.num_stages = P;
      spec.replica = static_cast<int>(r);
      spec.first_layer = st.first_layer;
      spec.end_layer = st.end_layer;
      spec.batch_size = p.batch_size;
      spec.micro_batches = p.micro_batches;
      spec.shares = st.shares;
      if (s > 0)
        spec.prev_shares = p.stages[s - 1].shares;
      if (s + 1 < P)
        spec.next_shares = p.stages[s + 1].shares;
      const auto& compiled = streams.at(next_stream++);
      if (compiled.stage != s || compiled.replica != static_cast<int>(r))
        throw std::logic_error("compile_schedule returned streams out of order");
      spec.stream = compiled.instructions;
      spec.loss = job_.loss;
      spec.optimizer = job_.optimizer;
      spec.credit_window = window;
      spec.slowdown = 1.0;
      spec.emulated_compute = emulated;
      spec.recv_timeout_ms = job_.step_timeout_ms;
      spec.report_after_ms = job_.micro_batch_report_ms;
      spec.trace_steps = job_.trace_path.empty() ? 0 : job_.trace_steps;
      spec.generation = generation_;
      spec.job = job_id_;
      spec.snapshot_every = snapshots_on() ? ft().snapshot_every : 0;
      spec.activation_codec = job_.compression.activations;
      spec.gradient_codec = job_.compression.gradients;
      spec.error_feedback = job_.compression.error_feedback;
      spec.all_reduce_codec = ring_plain ? "none" : job_.compression.all_reduce;
      auto d = st.devices[r];
      if (s > 0)
        spec.plain_prev = plain_of(d, p.stages[s - 1].devices);
      if (s + 1 < P)
        spec.plain_next = plain_of(d, p.stages[s + 1].devices);
      spec.label = "s" + std::to_string(s) + "r" + std::to_string(r) + "@"
                   + name_of(d);
      trace_.thread_names[{d, 100 * s + static_cast<int>(r)}]
        = "s" + std::to_string(s) + "r" + std::to_string(r);
      stage_member m;
      m.replica = static_cast<int>(r);
      m.device = d;
      m.endpoint = data_endpoint(d);
      m.spec = to_json(spec);
      m.keep = keep[s][r];
      // A replica built anew restores from its node's snapshots where the
      // node holds its range at the version (nothing is transferred).
      auto inv = src.inventories.find(d);
      auto got = sent.find(d);
      if (src.version >= 0 && inv != src.inventories.end()
          && tiles(inv->second, st.first_layer, st.end_layer, src.version)) {
        m.restore_version = src.version;
      } else if (got != sent.end()
                 && tiles(got->second, st.first_layer, st.end_layer, sent_version)) {
        m.restore_version = sent_version;
        ++states_sent_;
      } else {
        ships = true;
      }
      m.build_timeout_ms = (timeout * builds_on[d]).count();
      dep.members.push_back(std::move(m));
      member_devices.push_back(caf::actor_cast<caf::actor>(devices_[d]));
      ++num_replicas_;
    }
    std::string state; // the stage's state, for members that need it shipped
    if (ships) {
      state_of(s); // encoded now if send_states did not need it
      state = std::move(*encoded[s]); // each stage's state is shipped once
    }
    auto& a = stage_actors_.at({st.first_layer, st.end_layer});
    self_->send(a, deploy_atom::value, to_json(dep).dump(), member_devices, state);
  }
  // Every stage deploys at once; a device lost meanwhile ends the wait.
  int local = 0, shipped = 0;
  auto wait = timeout * (most_builds + 1);
  for (int s = 0; s < P; ++s) {
    const auto& st = p.stages[s];
    auto& a = stage_actors_.at({st.first_layer, st.end_layer});
    auto what = "deploying stage " + std::to_string(s);
    auto reply = await_reply<std::string, std::vector<caf::actor>, std::string>(
      -1, a, wait, what);
    const auto& err = reply.get_as<std::string>(0);
    if (!err.empty())
      throw std::runtime_error(err);
    const auto& replicas = reply.get_as<std::vector<caf::actor>>(1);
    if (replicas.size() != stages_[s].size())
      throw std::logic_error(what + ": wrong number of replicas");
    for (size_t r = 0; r < replicas.size(); ++r) {
      auto handle = caf::actor_cast<replica_actor>(replicas[r]);
      self_->monitor(handle);
      stages_[s][r].handle = handle;
      if (s == 0 || s == static_cast<int>(stages_.size()) - 1) { // inputs, labels
        // Over this process's data plane where the node has one, beside
        // the CAF connection that carries the control messages and
        // heartbeats (a large input queued there would hold them back).
        const auto endpoint = data_endpoint(stages_[s][r].device);
        stages_[s][r].feed
          = open_channel(replicas[r], endpoint.empty() ? nullptr : plane(), endpoint);
      }
    }
    auto report = json::parse(reply.get_as<std::string>(2));
    for (auto& k : report["kept"])
      kept_.push_back(k);
    local += report.value("restored_locally", 0);
    shipped += report.value("shipped", 0);
  }
  if (src.version >= 0)
    spdlog::info("deployed generation {}: {} replicas kept, {} restored from "
                 "their node's snapshots, {} shipped",
                 generation_, kept_.size(), local, shipped);
  // -- wiring: each stage actor links its members --
  auto me = caf::actor_cast<caf::actor>(self_);
  auto peers = [&](int s, std::vector<caf::actor>& handles) {
    std::vector<stage_peer> out;
    for (auto& q : stages_[s]) {
      out.push_back({q.replica, q.device, data_endpoint(q.device)});
      handles.push_back(caf::actor_cast<caf::actor>(q.handle));
    }
    return out;
  };
  for (int s = 0; s < P; ++s) {
    stage_wiring w;
    std::vector<caf::actor> prev, next;
    if (s > 0)
      w.prev = peers(s - 1, prev);
    if (s + 1 < P)
      w.next = peers(s + 1, next);
    caf::actor backup;
    int b = planner::backup_device(p, s);
    if (b >= 0 && snapshots_on()) {
      w.backup = {0, b, data_endpoint(b)};
      backup = caf::actor_cast<caf::actor>(devices_[b]);
    }
    const auto& st = p.stages[s];
    self_->send(stage_actors_.at({st.first_layer, st.end_layer}), wire_atom::value,
                me, prev, next, backup, to_json(w).dump());
  }
  for (int s = 0; s < P; ++s) {
    const auto& st = p.stages[s];
    auto reply = await_reply<std::string>(-1, stage_actors_.at({st.first_layer, st.end_layer}),
                                          timeout, "wiring stage " + std::to_string(s));
    if (!reply.get_as<std::string>(0).empty())
      throw std::runtime_error(reply.get_as<std::string>(0));
  }
  heartbeats_.reset(clock::now());
}

std::string supervisor::data_endpoint(int d) const {
  if (!job_.data_plane || d < 0 || d >= static_cast<int>(nodes_.size())
      || d >= static_cast<int>(caps_.size()))
    return {};
  return actors::data_endpoint(nodes_[d], caps_[d].value("data_port", int64_t{0}));
}

void supervisor::stop_replicas() {
  stop_micro_batches();
  // Their replicas' down messages would otherwise be taken for lost devices.
  for (auto& st : stages_)
    for (auto& r : st)
      if (r.handle)
        self_->demonitor(r.handle.address());
  // Each stops its replicas, and those a live node hands over later.
  std::vector<int32_t> lost(dead_.begin(), dead_.end());
  for (auto& [range, a] : stage_actors_)
    self_->send(a, stop_atom::value, lost);
  stage_actors_.clear();
  stages_.clear();
  num_replicas_ = 0;
}

std::map<int, json> supervisor::inventories() {
  // Ask every live device at once; a device that goes down meanwhile is
  // dropped as soon as its down message arrives (CAF 0.17 never fails a
  // request to a dead peer), one that stays silent after the heartbeat
  // tolerance.
  std::map<int, json> out;
  std::set<int> waiting;
  for (size_t d = 0; d < devices_.size(); ++d)
    if (!dead_.count(static_cast<int>(d))) {
      waiting.insert(static_cast<int>(d));
      self_->send(devices_[d], inventory_atom::value, static_cast<int32_t>(d));
    }
  auto deadline = clock::now() + heartbeats_.tolerance();
  auto drop = [&](int d, const std::string& why) {
    if (!waiting.erase(d))
      return;
    mark_lost(d, "lost_during_recovery", {{"reason", why}});
  };
  while (!waiting.empty()) {
    auto left = std::chrono::duration_cast<milliseconds>(deadline - clock::now());
    if (left.count() <= 0) {
      for (int d : std::set<int>(waiting))
        drop(d, "no inventory within " + std::to_string(heartbeats_.tolerance().count())
                  + " ms");
      break;
    }
    inbox_.receive_until(deadline, [&](inbox_message& m) {
      dispatch(
        m.content,
        [&](inventory_atom, int32_t d, std::string& text) {
          if (!waiting.count(d))
            return;
          try {
            out[d] = json::parse(text);
            waiting.erase(d);
          } catch (const json::exception& e) {
            drop(d, std::string("malformed inventory: ") + e.what());
          }
        },
        [&](caf::down_msg& dm) {
          for (size_t d = 0; d < devices_.size(); ++d)
            if (dm.source == devices_[d].address()) {
              closed_.insert(static_cast<int>(d));
              drop(static_cast<int>(d), "connection closed: " + sys_.render(dm.reason));
            }
        });
      return true; // anything else is dropped
    });
  }
  return out;
}

std::string supervisor::read_snapshot(int holder, const std::string& key,
                                      int64_t version, const std::string& what) {
  return read_in_pieces(
    [&](int64_t offset) {
      auto reply = ask<std::string, std::string, int64_t>(
        holder, devices_[holder], milliseconds(job_.step_timeout_ms), what,
        fetch_atom::value, key, version, offset);
      if (!reply.get_as<std::string>(0).empty())
        throw std::runtime_error(what + ": " + reply.get_as<std::string>(0));
      return std::make_pair(reply.get_as<std::string>(1), reply.get_as<int64_t>(2));
    },
    what);
}

serialization::named_tensors supervisor::fetch_full_state(
  const std::map<int, json>& inv, int64_t version) {
  const int L = static_cast<int>(model_->size());
  serialization::named_tensors full;
  std::set<std::string> seen;
  int at = 0;
  while (at < L) {
    // The held range from `at` reaching furthest, and who holds it.
    int best = at, holder = -1;
    std::string key;
    for (auto& [d, items] : inv)
      for (auto& [k, versions] : items.items()) {
        int a = 0, b = 0;
        if (!snapshot_store::parse_key(k, a, b) || a != at || b > L || b <= best)
          continue;
        for (auto& v : versions)
          if (v.is_number_integer() && v.get<int64_t>() == version) {
            best = b;
            holder = d;
            key = k;
          }
      }
    if (holder < 0)
      throw std::runtime_error("no live device holds layer "
                               + std::to_string(at) + " at step "
                               + std::to_string(version));
    auto what = "fetching snapshot " + key + " from node " + who(holder);
    auto bytes = read_snapshot(holder, key, version, what);
    ++fetched_snapshots_;
    for (auto& [name, t] : serialization::decode_tensors(bytes))
      if (seen.insert(name).second)
        full.emplace_back(name, t);
    at = best;
  }
  return full;
}

serialization::named_tensors supervisor::state_of(const replica_ref& r) {
  // As read_replica_state, by exchange: a timed request per piece would
  // leave its timeout behind (supervisor.hpp).
  try {
    return serialization::decode_tensors(read_in_pieces(
      [&](int64_t offset) {
        auto reply = exchange<std::string, int64_t>(
          r.handle, milliseconds(job_.step_timeout_ms), "reading a replica's state",
          state_atom::value, offset);
        return std::make_pair(reply.get_as<std::string>(0), reply.get_as<int64_t>(1));
      },
      "reading a replica's state"));
  } catch (const std::runtime_error& e) {
    throw std::runtime_error("collecting stage " + std::to_string(r.stage)
                             + " state from node " + who(r.device) + ": " + e.what());
  }
}

serialization::named_tensors supervisor::gather_full_state() {
  serialization::named_tensors full;
  for (auto& st : stages_)
    for (auto& entry : state_of(st[0]))
      full.push_back(std::move(entry));
  return full;
}

double supervisor::replica_divergence(const serialization::named_tensors& full) {
  // Replica 0's tensors are in `full` already: only the others are fetched.
  std::map<std::string, torch::Tensor> first(full.begin(), full.end());
  double worst = 0;
  for (auto& st : stages_)
    for (size_t r = 1; r < st.size(); ++r)
      for (const auto& [name, t] : state_of(st[r])) {
        auto it = first.find(name);
        if (it == first.end())
          throw std::runtime_error("stage " + std::to_string(st[r].stage) + ": replica "
                                   + std::to_string(st[r].replica) + " holds " + name
                                   + ", which replica 0 does not");
        worst = std::max(worst, (it->second.to(torch::kDouble) - t.to(torch::kDouble))
                                  .abs()
                                  .max()
                                  .item<double>());
      }
  return worst;
}


} // namespace asteroid::actors::detail
