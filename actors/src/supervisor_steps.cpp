// Supervisor: one step (feed, wait, heartbeats, scripted faults) and its metrics.
#include "supervisor.hpp"
#include "message_dispatch.hpp"
#include "supervisor_ask.hpp"

#include "asteroid/actors/link_switch.hpp"
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

#include <signal.h>

#include <cmath>

namespace asteroid::actors::detail {

// -- steps --------------------------------------------------------------------------

void supervisor::ping_all(clock::time_point now) {
  auto round = heartbeats_.pinged(now);
  hb_round_ = round;
  for (size_t d = 0; d < devices_.size(); ++d)
    if (!removed_.count(static_cast<int>(d)))
      self_->send(devices_[d], heartbeat_atom::value,
                  round * 4096 + static_cast<int64_t>(d));
}

void supervisor::heartbeat_answered(int64_t seq) {
  auto d = static_cast<int>(seq % 4096);
  if (d < 0 || d >= static_cast<int>(devices_.size()) || removed_.count(d))
    return;
  if (heartbeats_.dead(d)) {
    if (!returned_.count(d) && seq / 4096 == hb_round_) {
      returned_.insert(d);
      fault_event("answering_again", {{"node", name_of(d)}}, d);
    }
    return;
  }
  heartbeats_.answered(d, seq / 4096, clock::now());
}

namespace {

/// Why fault `f` cannot be injected into a node with capabilities `caps`
/// ("" if it can).
std::string injection_problem(const fault_spec& f, const json& caps) {
  if (f.action == "slow" || f.action == "hog")
    return "";
  if (f.action == "reset")
    return caps.value("data_port", int64_t{0}) > 0
             ? ""
             : "has no data plane: only data-plane connections can be reset";
  if (f.action == "cut" || f.action == "heal")
    return caps.value("link_interface", std::string{}).empty()
             ? "reports no link interface: a link can be cut only for a node "
               "in its own network namespace (scripts/testbed.sh, or "
               "`asteroid node --link-interface`)"
             : "";
  return caps.value("pid", int64_t{-1}) <= 0 ? "reported no process id" : "";
}

} // namespace

void supervisor::check_faults() const {
  for (size_t i = 0; i < job_.faults.size(); ++i) {
    const auto& f = job_.faults[i];
    if (f.node < 0 || static_cast<size_t>(f.node) >= caps_.size())
      throw std::invalid_argument("faults[" + std::to_string(i) + "]: node "
                                  + std::to_string(f.node) + " is not one of the "
                                  + std::to_string(caps_.size()) + " nodes");
    auto why = injection_problem(f, caps_[f.node]);
    if (!why.empty())
      throw std::invalid_argument("faults[" + std::to_string(i) + "] ("
                                  + f.action + "): node " + who(f.node) + " "
                                  + why);
  }
}

void supervisor::inject(const fault_spec& f) {
  auto d = f.node;
  json rec{{"node", name_of(d)}, {"action", f.action}, {"step", f.step}};
  // A node restarted since the check may report itself differently.
  auto why = injection_problem(f, caps_[d]);
  if (!why.empty())
    throw std::runtime_error("fault injection: node " + who(d) + " " + why);
  if (f.action == "slow") {
    rec["slowdown"] = f.slowdown;
    self_->send(devices_[d], slow_atom::value,
                static_cast<int32_t>(f.slowdown * 1000.0 + 0.5));
  } else if (f.action == "reset") {
    self_->send(devices_[d], reset_atom::value);
  } else if (f.action == "hog") {
    // Waited for at a step boundary (run_step; the node keeps answering
    // heartbeats meanwhile): from here on the node holds the memory,
    // however long writing it took. A device lost meanwhile is left to the
    // heartbeats, which see it silent.
    rec["bytes"] = f.bytes;
    std::string err;
    try {
      auto reply = ask<std::string>(d, devices_[d], milliseconds(60000), "a memory hog",
                                    hog_atom::value, f.bytes);
      err = reply.get_as<std::string>(0);
    } catch (const std::exception& e) {
      err = e.what();
    }
    if (!err.empty()) {
      spdlog::error("fault injection: node {}: {}", who(d), err);
      rec["error"] = err;
    }
  } else if (f.action == "cut" || f.action == "heal") {
    auto dev = caps_[d].value("link_interface", std::string{});
    rec["interface"] = dev;
    auto err = set_interface_up(dev, f.action == "heal");
    if (!err.empty()) {
      spdlog::error("fault injection: node {}: {}", who(d), err);
      rec["error"] = err;
    }
  } else {
    auto pid = caps_[d].value("pid", int64_t{-1});
    int sig = f.action == "kill" ? SIGKILL : f.action == "stop" ? SIGSTOP
                                                                : SIGCONT;
    if (::kill(static_cast<pid_t>(pid), sig) != 0)
      spdlog::error("fault injection: signal to pid {} failed", pid);
    rec["pid"] = pid;
  }
  if (f.action == "kill" || f.action == "stop" || f.action == "cut") {
    injected_at_[d] = clock::now();
    last_fault_ = clock::now();
  }
  fault_event("injected", rec, d);
}

void supervisor::inject_faults_when(const std::string& when, int64_t step) {
  for (size_t i = 0; i < job_.faults.size(); ++i)
    if (job_.faults[i].when == when && job_.faults[i].step <= step
        && faults_fired_.insert(i).second)
      inject(job_.faults[i]);
}

void supervisor::feed(int64_t step, const data::batch& batch) {
  const auto P = plan_.num_stages();
  const auto M = plan_.micro_batches;
  const auto mbs = plan_.micro_batch_size();
  spawn_micro_batches(step);
  // The first stage's inputs and the last stage's labels, one tensor
  // message per micro-batch and replica: the rows of its share.
  for (auto kind : {serialization::tensor_kind::input,
                    serialization::tensor_kind::label}) {
    const bool inputs = kind == serialization::tensor_kind::input;
    const int s = inputs ? 0 : P - 1;
    const auto& source = inputs ? batch.inputs : batch.targets;
    int64_t at = 0;
    for (size_t r = 0; r < plan_.stages[s].shares.size(); ++r) {
      auto share = plan_.stages[s].shares[r];
      for (int m = 0; m < M; ++m) {
        serialization::tensor_message msg;
        msg.kind = kind;
        msg.job = job_id_;
        msg.generation = generation_;
        msg.step = step;
        msg.micro_batch = m;
        auto b0 = m * mbs + at;
        msg.payload = serialization::encode_tensor(source.slice(0, b0, b0 + share));
        auto dropped = stages_[s][r].feed->send(self_, std::move(msg));
        if (!dropped.empty())
          spdlog::warn("step {}: {} of micro-batch {} for stage {} replica {} dropped: {}",
                       step, inputs ? "inputs" : "labels", m, s, r, dropped);
      }
      at += share;
    }
  }
  fed_step_ = step;
}

std::set<int> supervisor::run_step(int64_t step, const data::batch& batch,
                                   const std::function<const data::batch*()>& next,
                                   std::vector<json>& reports) {
  // A memory hog holds its memory before its step starts (the step never
  // sees the node without it): injected here, waited for; never run ahead
  // across (may_run_ahead).
  if (!started_ahead(step))
    for (size_t i = 0; i < job_.faults.size(); ++i)
      if (job_.faults[i].action == "hog" && job_.faults[i].when == "step"
          && job_.faults[i].step <= step && faults_fired_.insert(i).second)
        inject(job_.faults[i]);
  auto t0 = clock::now();
  heartbeats_.catch_up(t0);
  if (fed_step_ != step)
    feed(step, batch);
  auto start_all = [&](int64_t s) {
    auto reports_to = micro_batch_reports_to(s);
    for (auto& st : stages_)
      for (auto& r : st)
        self_->send(r.handle, start_atom::value, s, reports_to);
  };
  if (!started_ahead(step))
    start_all(step);
  if (early_.generation == generation_ && early_.step == step)
    reports = std::move(early_.reports);
  early_ = {};
  // Replicas keep loads by step: the next one waits there while this one
  // runs. A recovery deploys new replicas and feeds again.
  if (const auto* b = next()) {
    feed(step + 1, *b);
    // Replicas keep starts by step too: the next step's start waits there,
    // and a replica begins that step the moment it finishes this one,
    // without a round trip through the supervisor.
    if (may_run_ahead(step + 1)) {
      start_all(step + 1);
      started_ahead_ = {generation_, step + 1};
    }
  }
  // Faults scripted for this step, and those whose step ended before their
  // delay ran out (they fire at once).
  std::vector<std::pair<clock::time_point, size_t>> due;
  for (size_t i = 0; i < job_.faults.size(); ++i)
    if (job_.faults[i].when == "step" && job_.faults[i].step <= step
        && !faults_fired_.count(i))
      due.push_back({job_.faults[i].step == step
                       ? t0 + milliseconds(job_.faults[i].delay_ms)
                       : t0,
                     i});
  // Wait for every replica's report, a failure or a loss.
  std::set<int> lost;
  std::string failure;
  auto deadline = t0 + milliseconds(job_.step_timeout_ms);
  auto lose = [&](int d, const std::string& why) {
    if (dead_.count(d) || lost.count(d))
      return;
    lost.insert(d);
    heartbeats_.mark_dead(d);
    json rec{{"node", name_of(d)}, {"step", step}, {"reason", why}};
    if (injected_at_.count(d))
      rec["detect_s"] = seconds_between(injected_at_[d], clock::now());
    fault_event("detected", rec, d);
  };
  while (static_cast<int>(reports.size()) < num_replicas_ && failure.empty()
         && lost.empty()) {
    auto now = clock::now();
    for (auto& [when, i] : due)
      if (!faults_fired_.count(i) && now >= when) {
        faults_fired_.insert(i);
        inject(job_.faults[i]);
      }
    // This loop wakes by the next ping at the latest: later than a whole
    // round means this process was held up (a loaded host), and the
    // answers wait unread in the mailbox; judged now, every device would
    // look silent at once.
    heartbeats_.catch_up(now);
    if (heartbeats_.due(now))
      ping_all(now);
    for (int d : heartbeats_.newly_dead(now))
      lose(d, silence_reason());
    if (lost.empty())
      if (auto l = judge_unreachable(now)) {
        const bool probed = snapshots_on() && can_plan() && l->other >= 0;
        lose(l->device, l->reason
                          + (probed ? " (admitted again once a probe from " + name_of(l->other)
                                        + " gets through)"
                                    : std::string(" (not admitted again in this job)")));
        removed_.insert(l->device);
        if (probed)
          cut_paths_.add(l->device, l->other, now);
      }
    if (!lost.empty())
      break;
    if (now >= deadline) {
      failure = "step " + std::to_string(step) + ": no report within "
                + std::to_string(job_.step_timeout_ms) + " ms ("
                + std::to_string(reports.size()) + " of "
                + std::to_string(num_replicas_) + " replicas done)";
      break;
    }
    auto wake = std::min(deadline, heartbeats_.next_ping());
    for (auto& [when, i] : due)
      if (!faults_fired_.count(i))
        wake = std::min(wake, when);
    auto wait = std::max(milliseconds(1),
                         std::chrono::duration_cast<milliseconds>(wake - now));
    inbox_.receive_until(now + wait, [&](inbox_message& m) {
      dispatch(
        m.content,
        [&](done_atom, int64_t s, std::string& text) {
          auto rep = json::parse(text);
          if (rep.value("generation", -1) != generation_)
            return;
          rep["report_bytes"] = static_cast<int64_t>(text.size());
          if (s == step) {
            reports.push_back(std::move(rep));
          } else if (s == step + 1 && started_ahead(step + 1)) {
            // A replica that finished this step early is already through
            // the next (it needed no one still busy with this one).
            early_.generation = generation_;
            early_.step = s;
            early_.reports.push_back(std::move(rep));
          }
        },
        [&](fail_atom, int32_t gen, std::string& what) {
          if (gen == generation_)
            failure = what;
        },
        [&](heartbeat_atom, int64_t seq) { heartbeat_answered(seq); },
        [&](caf::down_msg& dm) {
          auto [d, why] = device_down(dm);
          if (d >= 0)
            lose(d, why);
        },
        [&](unreachable_atom, std::string& endpoint, std::string& why) {
          hold_unreachable(m.sender, endpoint, why);
        });
      // Late answers and messages of replaced replicas: dropped, not left
      // to pile up.
      return true;
    });
  }
  if (!failure.empty())
    throw std::runtime_error(failure);
  if (lost.empty())
    micro_batch_relayed_ = forget_micro_batches(step);
  return lost;
}

bool supervisor::may_run_ahead(int64_t next) {
  if (!job_.run_ahead || !returned_.empty() || drift_may_replan_next()
      || memory_replan_due_ || stop_requested()
      || (control_ && (control_->removals_pending() || control_->additions_pending())))
    return false;
  if (checkpoints_on() && next % ft().checkpoint_every == 0
      && next != checkpoint_step_)
    return false; // the checkpoint takes the weights between the two steps
  for (size_t i = 0; i < job_.faults.size(); ++i)
    if (job_.faults[i].when == "step" && job_.faults[i].step <= next
        && !faults_fired_.count(i))
      return false; // scripted faults keep their timing relative to a start
  return true;
}

bool supervisor::drift_may_replan_next() const {
  // As track_speed decides: a re-plan needs drift_steps slow steps in a row,
  // so one more report can only trigger it where a streak is one short.
  if (!drift_tracking_on())
    return false;
  if (ft().drift_steps <= 1)
    return true;
  for (const auto& [d, t] : speed_track_)
    if (t.generation == generation_ && t.streak + 1 >= ft().drift_steps)
      return true;
  return false;
}

void supervisor::record_iteration(int64_t step, int64_t epoch, double wall,
                                  double t_start, std::vector<json>& reports,
                                  bool started_ahead) {
  const auto P = plan_.num_stages();
  double loss = 0;
  int64_t micro_batch_reports = 0, micro_batch_messages = 0, report_bytes = 0;
  json links = json::object();
  json reps = json::array();
  for (auto& rep : reports) {
    if (rep["stage"] == P - 1) {
      // JSON has no NaN or infinity: a replica's non-finite loss arrives as
      // null. Weights that far gone are of no use; the job stops saying so.
      const auto& l = rep["loss"];
      if (!l.is_number() || !std::isfinite(l.get<double>()))
        throw std::runtime_error(
          "step " + std::to_string(step) + ": the loss is not a finite number (training "
          + "diverged; a smaller lr, now " + json(job_.optimizer.lr).dump()
          + ", or weight_decay, now " + json(job_.optimizer.weight_decay).dump()
          + ", may help)");
      loss += l.get<double>();
    }
    for (auto& [k, v] : rep["bytes"].items())
      links[k] = v;
    micro_batch_reports += rep.value("micro_batch_reports", int64_t{0});
    micro_batch_messages += rep.value("micro_batch_messages", int64_t{0});
    report_bytes += rep.value("report_bytes", int64_t{0});
    int s = rep["stage"], r = rep["replica"];
    int d = stages_[s][r].device;
    reps.push_back({{"replica", rep["label"]},
                    {"actor", rep.value("actor", int64_t{-1})},
                    {"stage", s},
                    {"busy_s", rep["busy_s"]},
                    {"overrun_s", rep.value("overrun_s", 0.0)},
                    {"idle_s", std::max(0.0, wall - rep["busy_s"].get<double>())},
                    {"max_unacked", rep["max_unacked"]},
                    {"model_bytes", rep.value("model_bytes", int64_t{0})},
                    {"predicted_bytes", rep.value("predicted_bytes", int64_t{0})},
                    {"peak_rss_bytes", rep.value("peak_rss_bytes", int64_t{-1})},
                    {"job_peak_bytes", rep.value("job_peak_bytes", int64_t{-1})},
                    {"host_job_peak_bytes", rep.value("host_job_peak_bytes", int64_t{-1})},
                    {"tensor_peak_bytes", rep.value("tensor_peak_bytes", int64_t{-1})},
                    {"device_reserved_peak_bytes",
                     rep.value("device_reserved_peak_bytes", int64_t{-1})},
                    {"library_workspace_bytes",
                     rep.value("library_workspace_bytes", int64_t{0})},
                    {"compute_device", rep.value("compute_device", std::string("cpu"))},
                    {"memory_budget_bytes", rep.value("memory_budget_bytes", int64_t{-1})},
                    {"channels", rep.value("channels", json::object())}});
    if (step < job_.trace_steps)
      for (auto& ev : rep["events"]) {
        // What the replica measured besides name and span goes to the args.
        std::map<std::string, planner::trace_arg> args{{"step", step}};
        for (auto& [k, v] : ev.items())
          if (k == "ts" || k == "dur")
            continue;
          else if (v.is_number_integer())
            args[k] = v.get<int64_t>();
          else if (v.is_number())
            args[k] = v.get<double>();
        trace_.events.push_back({ev["name"].get<std::string>(), "compute",
                                 ev["ts"].get<double>() - t_start,
                                 ev["dur"].get<double>(), d, 100 * s + r,
                                 std::move(args)});
      }
  }
  json stage_actors = json::array(); // by stage: which actor owns its group
  for (auto& st : plan_.stages) {
    auto it = stage_actors_.find({st.first_layer, st.end_layer});
    stage_actors.push_back(it != stage_actors_.end()
                             ? static_cast<int64_t>(it->second.id())
                             : int64_t{-1});
  }
  const auto B = plan_.batch_size;
  json rec{{"step", step + 1},       {"epoch", epoch},
           {"loss", loss},           {"seconds", wall},
           {"samples_per_s", B / wall}, {"t_s", (wall_us() - t_start) * 1e-6},
           {"replicas", reps},
           {"stage_actors", stage_actors},
           {"link_bytes", links},    {"generation", generation_},
           {"micro_batch_actors", job_.micro_batch_actors ? plan_.micro_batches : 0},
           {"micro_batch_reports", micro_batch_reports},
           {"micro_batch_messages", micro_batch_messages},
           {"micro_batch_relayed", micro_batch_relayed_},
           // The replicas' step reports as they arrived (JSON text): they
           // carry compute spans only for the steps a trace records.
           {"report_bytes", report_bytes},
           {"started_ahead", started_ahead},
           // Messages waiting for the step driver, in its actor's mailbox
           // and held in its inbox: stays small unless something leaves
           // messages no wait takes (supervisor.hpp, exchange).
           {"supervisor_mailbox", static_cast<int64_t>(self_->mailbox().size() + inbox_.held())}};
  metrics_.emit("iteration", rec);
  result_.iterations.push_back(rec);
  result_.last_loss = loss;
}


} // namespace asteroid::actors::detail
