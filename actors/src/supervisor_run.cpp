// Supervisor: the run loop (steps, recoveries, metrics, final weights).
#include "supervisor.hpp"

#include "asteroid/actors/remote_probe.hpp"
#include "asteroid/actors/stage_state.hpp"
#include "asteroid/data/sampler.hpp"
#include "asteroid/planner/json_io.hpp"
#include "asteroid/planner/plan_patch.hpp"
#include "asteroid/training/evaluate.hpp"

#include <spdlog/spdlog.h>

#include <limits>

namespace asteroid::actors::detail {

// -- the run ---------------------------------------------------------------------------

job_result supervisor::run() {
  read_capabilities();
  check_faults();
  if (!known_compute_time(job_.compute_time))
    throw std::invalid_argument("compute_time '" + job_.compute_time
                                + "' (expected measured or profile)");
  // The plan's batch size is the job's (initial_plan checks).
  const auto B = job_.batch_size;
  auto per_epoch = B > 0 ? train_->size() / B : 0;
  if (per_epoch < 1)
    throw std::invalid_argument("dataset has fewer samples than one batch");
  if (job_.epochs > std::numeric_limits<int64_t>::max() / per_epoch)
    throw std::invalid_argument("epochs (" + std::to_string(job_.epochs) + ") x "
                                + std::to_string(per_epoch)
                                + " steps per epoch does not fit a 64-bit step count");
  int64_t total_steps = job_.epochs * per_epoch;
  if (job_.max_steps >= 0)
    total_steps = std::min(total_steps, job_.max_steps);
  last_step_ = total_steps;
  // Before any node is claimed: a checkpoint that does not fit the job fails
  // it here, naming the file.
  const auto resumed = job_.resume_from.empty() ? state_source{}
                                                : resume_state(total_steps);
  const int64_t first_step = std::max<int64_t>(resumed.version, 0);
  claim_nodes();
  speed_scale_.assign(devices_.size(), 1.0);
  memory_scale_.assign(devices_.size(), 1.0);
  // The planner needs the links; so does a job that compresses only its
  // slow links, whoever planned it.
  if ((!job_.plan || job_.compression.below_mbps > 0) && job_.measure_links
      && nodes_.size() == devices_.size()) {
    link_probe_options lp;
    lp.timeout = milliseconds(job_.connect_timeout_ms) + std::chrono::seconds(5);
    inbox_.run_aside([&] {
      links_ = measure_cluster(sys_, devices_, nodes_, std::max(job_.profile_node, 0), lp);
    });
    if (job_.profile_node < 0) // profiled here, at slowdown 1
      for (size_t d = 0; d < devices_.size(); ++d)
        links_->devices[d].speed = 1.0 / caps_[d].value("slowdown", 1.0);
    metrics_.emit("links", {{"cluster", json(*links_)}});
  }
  enter(job_state::deploying);
  plan_ = initial_plan();
  link_nodes();
  if (ft().recovery == "restart" && ft().checkpoint_path.empty())
    throw std::invalid_argument("fault_tolerance: recovery 'restart' needs "
                                "a 'checkpoint' file");
  // Profile now, not in the middle of a recovery (the restart baseline
  // re-profiles on purpose: it starts from scratch).
  if (snapshots_on())
    known_profile();
  if (job_.compute_time == "profile")
    profile(); // what every forward and backward pass will last
  // A device lost before the first step: the plan is patched around it as
  // for a loss at step 0 (nothing to replay; the weights are the model's).
  const auto first_plan = plan_;
  const auto deploy_began = clock::now();
  deploy_surviving(
    [&]() -> std::pair<planner::plan, state_source> {
      if (dead_.empty()) {
        inject_faults_when("start", std::numeric_limits<int64_t>::max());
        return {first_plan, resumed};
      }
      if (!snapshots_on() && ft().recovery != "restart")
        throw std::runtime_error("node " + who(*dead_.begin())
                                 + " was lost while the job deployed and "
                                   "recovery is off");
      planner::patch_options how;
      how.rebalance = ft().recovery != "replay_no_rebalance";
      auto next = planner::patch_plan(first_plan, dead_, full_cluster(),
                                      known_profile(), how)
                    .patched;
      check_plan_fits(next, model_, job_.model, static_cast<int>(devices_.size()));
      return {next, resumed};
    },
    first_step);
  // Building every replica and moving the stage states to them: on slow
  // links most of a large model's start (docs/runtime.md, "Moving stage states").
  const auto deploy_s = seconds_between(deploy_began, clock::now());
  spdlog::info("deployed in {:.2f} s", deploy_s);
  for (size_t d = 0; d < devices_.size(); ++d) {
    trace_.process_names[static_cast<int>(d)] = name_of(static_cast<int>(d));
    trace_.thread_names[{static_cast<int>(d), 999}] = "faults";
  }
  data::sampler order{train_->size(), job_.seed};
  if (profile_)
    for (const auto& d : full_cluster().devices)
      result_.device_speeds.push_back(d.speed);
  metrics_.emit("start", {{"model", job_.model},
                          {"stages", plan_.num_stages()},
                          {"micro_batches", plan_.micro_batches},
                          {"batch_size", B},
                          {"replicas", num_replicas_},
                          {"steps", total_steps},
                          {"first_step", first_step},
                          {"deploy_s", deploy_s},
                          {"states_sent", states_sent_},
                          {"resumed_from", job_.resume_from},
                          {"recovery", ft().recovery},
                          {"device_speeds", result_.device_speeds},
                          {"speeds_source", result_.speeds_source}});
  result_.plan = plan_;
  enter(job_state::running);
  auto t_start = wall_us();
  int64_t step = first_step;
  int64_t cached_epoch = -1;
  auto last_t1 = t_start;
  std::vector<std::vector<int64_t>> batches;
  std::optional<std::pair<int64_t, data::batch>> ahead; ///< the next step's batch
  try {
    while (step < total_steps) {
      // A stop ends the job between steps; a step already started ahead is
      // running on the replicas and completes first.
      if (stop_requested() && !started_ahead(step)) {
        result_.stopped = true;
        break;
      }
      auto epoch = step / per_epoch;
      if (epoch != cached_epoch) {
        batches = order.batches(epoch, B, true);
        cached_epoch = epoch;
      }
      if (checkpoints_on() && step % ft().checkpoint_every == 0
          && step != checkpoint_step_)
        save_checkpoint(step, gather_full_state());
      const bool started_early = started_ahead(step);
      if (!started_early) {
        remove_requested(step);
        add_requested(step);
      }
      probe_cut_paths();
      rejoin(step, !started_early);
      // A step started ahead began when its replicas finished the last one:
      // its time runs from there, so the steps' times add up to the run's.
      auto t0 = started_early ? last_t1 : wall_us();
      auto batch = ahead && ahead->first == step
                     ? std::move(ahead->second)
                     : train_->get_batch(batches[static_cast<size_t>(step % per_epoch)]);
      ahead.reset();
      // The next step's batch, read and fed while this one runs (when it is
      // in this epoch; a re-deployment between the steps feeds it again).
      auto read_ahead = [&]() -> const data::batch* {
        if (step + 1 >= total_steps || (step + 1) / per_epoch != epoch)
          return nullptr;
        ahead.emplace(step + 1, train_->get_batch(
                                  batches[static_cast<size_t>((step + 1) % per_epoch)]));
        return &ahead->second;
      };
      std::vector<json> reports;
      auto lost = run_step(step, batch, read_ahead, reports);
      if (!lost.empty()) {
        enter(job_state::recovering);
        step = recover(lost, step);
        enter(job_state::running);
        continue;
      }
      auto t1 = wall_us();
      last_t1 = t1;
      record_iteration(step, epoch, (t1 - t0) * 1e-6, t_start, reports, started_early);
      if (awaiting_resume_) {
        json rec{{"step", step + 1},
                 {"since_recovery_start_s",
                  seconds_between(*awaiting_resume_, clock::now())}};
        if (last_fault_)
          rec["since_fault_s"] = seconds_between(*last_fault_, clock::now());
        fault_event("resumed", rec);
        awaiting_resume_.reset();
      }
      if (catch_up_step_ && step == *catch_up_step_) {
        // Progress lost to the fault is made up: the interrupted step is done.
        json rec{{"step", step + 1}};
        if (last_fault_)
          rec["since_fault_s"] = seconds_between(*last_fault_, clock::now());
        fault_event("caught_up", rec);
        catch_up_step_.reset();
      }
      ++step;
      if (step < total_steps && !track_speed(step, reports))
        track_memory(step, reports);
      auto elapsed = (t1 - t_start) * 1e-6;
      progress_.update("step " + std::to_string(step) + "/"
                         + std::to_string(total_steps),
                       step * B, total_steps * B,
                       elapsed > 0 ? (step - first_step) * B / elapsed : 0.0,
                       result_.last_loss);
    }
  } catch (...) {
    progress_.finish();
    stop_replicas();
    throw;
  }
  progress_.finish();
  result_.steps = step;
  result_.seconds = (wall_us() - t_start) * 1e-6;
  result_.samples_per_s
    = result_.seconds > 0 ? (step - first_step) * B / result_.seconds : 0;
  result_.plan = plan_;
  // -- gather the weights --
  serialization::named_tensors full;
  try {
    full = gather_full_state();
    if (job_.check_replicas) {
      result_.replica_divergence = replica_divergence(full);
      if (result_.replica_divergence > 0)
        spdlog::warn("the replicas of a stage ended {} apart (largest absolute "
                     "difference of a weight or optimizer state)",
                     result_.replica_divergence);
    }
  } catch (...) {
    stop_replicas();
    throw;
  }
  stop_replicas();
  // The state the job ends with, stopped or not: what a checkpoint taken
  // every few steps would otherwise lose.
  if (checkpoints_on())
    save_checkpoint(step, full);
  load_stage_state(model_, 0, static_cast<int>(model_->size()), nullptr, full);
  result_.model = model_;
  // A stopped job ends now: its user asked it to (Ctrl-C, a stop message),
  // and a pass over the test set can take longer than many steps.
  if (test_ && job_.evaluate && !result_.stopped)
    result_.test = training::evaluate(model_, *test_, 500, job_.test_limit);
  // What this process sent on its own data plane: stage states, inputs
  // and labels (none without data planes).
  const auto sent = plane_ ? plane_->stats() : data_plane::counters{};
  if (plane_)
    spdlog::info("the supervisor's data plane: {}", to_string(sent));
  metrics_.emit("done", {{"steps", result_.steps},
                         {"data_plane_frames_out", sent.frames_out},
                         {"data_plane_bytes_out", sent.bytes_out},
                         {"stopped", result_.stopped},
                         {"seconds", result_.seconds},
                         {"samples_per_s", result_.samples_per_s},
                         {"loss", result_.last_loss},
                         {"test_accuracy", result_.test.accuracy},
                         {"faults", result_.fault_events.size()},
                         {"checkpoint", ft().checkpoint_path},
                         {"checkpoint_step", checkpoint_step_},
                         {"replica_divergence", result_.replica_divergence}});
  for (auto& ev : trace_.events)
    if (ev.category == "fault")
      ev.start_us -= t_start;
  if (!job_.trace_path.empty())
    planner::write_chrome_trace(trace_, job_.trace_path);
  return result_;
}


} // namespace asteroid::actors::detail
