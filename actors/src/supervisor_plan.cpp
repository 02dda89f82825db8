// Supervisor: capabilities, profile, cluster model and plans.
#include "supervisor.hpp"
#include "supervisor_ask.hpp"

#include "asteroid/actors/node.hpp"
#include "asteroid/actors/node_capabilities.hpp"
#include "asteroid/actors/remote_probe.hpp"
#include "asteroid/actors/snapshot_store.hpp"
#include "asteroid/actors/stage_state.hpp"
#include "asteroid/planner/cost_model.hpp"
#include "asteroid/planner/json_io.hpp"
#include "asteroid/planner/plan_patch.hpp"
#include "asteroid/planner/planner.hpp"
#include "asteroid/serialization/checkpoint.hpp"
#include "asteroid/training/model_registry.hpp"
#include "asteroid/training/profiler.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <limits>

namespace asteroid::actors::detail {

void supervisor::fault_event(const std::string& event, json rec, int device) {
  rec["generation"] = generation_;
  // Metrics lines are {"event": "fault", "fault": "<what>", ...}: the sink
  // owns the "event" key.
  rec["fault"] = event;
  metrics_.emit("fault", rec);
  rec["event"] = event;
  result_.fault_events.push_back(rec);
  // Absolute time for now; run() rebases fault events to the job start.
  trace_.events.push_back({event, "fault", wall_us(), 0.0,
                           device < 0 ? 0 : device, 999,
                           {{"detail", rec.dump()}}});
  spdlog::warn("fault: {}", rec.dump());
}

// -- planning -------------------------------------------------------------------

void supervisor::read_capabilities() {
  auto timeout = milliseconds(job_.connect_timeout_ms);
  for (size_t d = 0; d < devices_.size(); ++d) {
    self_->monitor(devices_[d]);
    auto out = exchange<std::string>(devices_[d], timeout,
                                     "node " + who(static_cast<int>(d))
                                       + " did not report capabilities",
                                     caps_atom::value)
                 .get_as<std::string>(0);
    caps_.push_back(json::parse(out));
  }
}

std::optional<planner::model_profile> supervisor::known_profile() {
  if (can_plan())
    return profile();
  return std::nullopt;
}

const planner::model_profile& supervisor::profile() {
  if (profile_)
    return *profile_;
  auto name = job_.planner.empty() ? std::string("asteroid") : job_.planner;
  try {
    if (!job_.profile_path.empty()) {
      profile_ = planner::load_model_profile_file(job_.profile_path);
    } else {
      training::profiler_options popts;
      auto mb = job_.batch_size;
      popts.batch_sizes = {1, std::max<int64_t>(1, mb / 4), mb};
      popts.repeats = 3;
      // A fresh copy: profiling runs forward passes, which would move
      // BatchNorm statistics of the weights we deploy.
      if (job_.profile_node >= 0) {
        inbox_.run_aside([&] {
          profile_ = profile_on_node(sys_, devices_.at(job_.profile_node),
                                     job_.model, job_.model_options, popts,
                                     milliseconds(job_.step_timeout_ms));
        });
      } else {
        auto probe = training::build_model(job_.model, job_.model_options);
        profile_ = training::profile_model(probe, job_.model, popts);
      }
    }
  } catch (const std::exception& e) {
    throw std::runtime_error("planner '" + name + "': profiling model '"
                             + job_.model + "' failed: " + e.what());
  }
  // The memory model counts the copy a snapshot takes when the replicas take
  // them: the rule their specs are given by (not for 'restart' or 'none').
  // A GPU node copies its snapshot to host memory, outside the device
  // memory its budget is for: the planner (one rule for every device) leaves
  // the copy out only when every device computes on a GPU.
  const bool all_on_gpu
    = !caps_.empty() && std::all_of(caps_.begin(), caps_.end(), computes_on_gpu);
  profile_->state_snapshots = snapshots_on() && !all_on_gpu;
  if (profile_->num_layers() != model_->size())
    throw std::invalid_argument(
      "profile of '" + profile_->model + "' has "
      + std::to_string(profile_->num_layers()) + " layers, model '"
      + job_.model + "' has " + std::to_string(model_->size()));
  // Once per job: a restart recovery profiles again, but lost nodes cannot
  // be timed and the survivors' speeds have not changed (drift tracks that).
  if (result_.speeds_source.empty())
    measure_speeds();
  return *profile_;
}

void supervisor::measure_speeds() {
  if (!speeds_to_measure(job_.speeds, caps_)) {
    result_.speeds_source = "reported";
    return;
  }
  // One forward and backward pass of the whole model at a micro-batch of
  // the job's, on every node (each with its own device and emulated
  // slowdown), against the same in the profile the planner uses.
  const int64_t rows = std::max<int64_t>(1, job_.batch_size / std::max(1, job_.micro_batches));
  const double reference = profile_->step_time(static_cast<double>(rows));
  training::profiler_options popts;
  popts.batch_sizes = {rows};
  popts.warmup = 1;
  popts.repeats = 3;
  // The nodes are timed in turn, so a busy spell of the host (or of a
  // node's machine) would make whichever node it fell on look slow, and
  // a median does not forgive a spell as long as a node's repeats. So
  // the nodes are timed in rounds, each round in the other order, and a
  // node keeps its fastest round: a device is never faster than it can
  // be, only sometimes slower.
  constexpr int rounds = 3;
  std::vector<double> fastest(devices_.size(), std::numeric_limits<double>::infinity());
  for (int round = 0; round < rounds; ++round)
    for (size_t i = 0; i < devices_.size(); ++i) {
      const size_t d = round % 2 == 0 ? i : devices_.size() - 1 - i;
      planner::model_profile p;
      inbox_.run_aside([&] {
        p = profile_on_node(sys_, devices_[d], job_.model, job_.model_options, popts,
                            milliseconds(job_.step_timeout_ms));
      });
      const double t = p.step_time(static_cast<double>(rows));
      if (!(t > 0) || !(reference > 0))
        throw std::runtime_error("timing '" + job_.model + "' on node "
                                 + who(static_cast<int>(d)) + " gave no time");
      fastest[d] = std::min(fastest[d], t);
    }
  std::vector<double> speeds;
  json record{{"rows", rows}, {"reference_s", reference}, {"rounds", rounds}};
  for (size_t d = 0; d < devices_.size(); ++d) {
    speeds.push_back(reference / fastest[d]);
    record["nodes"].push_back({{"node", name_of(static_cast<int>(d))},
                               {"seconds", fastest[d]},
                               {"speed", reference / fastest[d]}});
  }
  measured_speed_ = speeds;
  result_.speeds_source = "measured";
  spdlog::info("node speeds measured: {}", record.dump());
}

planner::cluster supervisor::full_cluster() const {
  auto c = links_ ? *links_ : reported_cluster();
  for (size_t d = 0; d < c.devices.size() && d < measured_speed_.size(); ++d)
    c.devices[d].speed = measured_speed_[d];
  for (size_t d = 0; d < c.devices.size() && d < speed_scale_.size(); ++d)
    c.devices[d].speed *= speed_scale_[d];
  for (size_t d = 0; d < c.devices.size() && d < memory_scale_.size(); ++d)
    c.devices[d].memory_bytes = static_cast<int64_t>(
      static_cast<double>(c.devices[d].memory_bytes) * memory_scale_[d]);
  // The planner prices stage-boundary transfers and all-reduces at the
  // bytes the job's compression puts on the wire.
  c.activation_wire_ratio = kernels::wire_ratio(
    kernels::parse_wire_codec(job_.compression.activations));
  c.gradient_wire_ratio = kernels::wire_ratio(
    kernels::parse_wire_codec(job_.compression.gradients));
  c.all_reduce_wire_ratio = kernels::wire_ratio(
    kernels::parse_wire_codec(job_.compression.all_reduce));
  c.compress_below_Bps = job_.compression.below_mbps * 1e6 / 8.0;
  c.full_duplex_links = job_.full_duplex_links;
  return c;
}

double supervisor::reference_slowdown() const {
  return job_.profile_node >= 0 ? caps_.at(job_.profile_node).value("slowdown", 1.0) : 1.0;
}

planner::cluster supervisor::reported_cluster() const {
  // Speeds are relative to where the profile was taken.
  const double reference = reference_slowdown();
  std::vector<planner::device_spec> specs;
  for (size_t d = 0; d < devices_.size(); ++d)
    specs.push_back({name_of(static_cast<int>(d)), "local",
                     reference / caps_[d].value("slowdown", 1.0),
                     plannable_memory_bytes(caps_[d]),
                     d < nodes_.size() ? nodes_[d] : ""});
  return planner::cluster::uniform("job", specs, 1e9);
}

planner::plan supervisor::fresh_plan_on_survivors() {
  auto all = full_cluster();
  std::vector<int> alive;
  std::vector<planner::device_spec> specs;
  for (size_t d = 0; d < devices_.size(); ++d)
    if (!dead_.count(static_cast<int>(d))) {
      alive.push_back(static_cast<int>(d));
      specs.push_back(all.devices[d]);
    }
  if (alive.empty())
    throw std::runtime_error("no device left");
  // A copy keeps every pricing setting of the job's cluster (co-location,
  // wire ratios, duplex); only its devices and links shrink to the alive.
  auto c = all;
  c.name = "survivors";
  c.devices = std::move(specs);
  const auto n = alive.size();
  c.bandwidth_Bps.assign(n, std::vector<double>(n, 0.0));
  c.latency_s.assign(n, std::vector<double>(n, 0.0));
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < n; ++j) {
      c.bandwidth_Bps[i][j] = all.bandwidth_Bps[alive[i]][alive[j]];
      c.latency_s[i][j] = all.latency_s[alive[i]][alive[j]];
    }
  auto name = job_.planner.empty() ? std::string("asteroid") : job_.planner;
  auto p = planner::make_planner(name)->make_plan(profile(), c, job_.batch_size);
  for (auto& st : p.stages)
    for (auto& d : st.devices)
      d = alive.at(static_cast<size_t>(d));
  planner::evaluate(p, profile(), all);
  return p;
}

planner::plan supervisor::initial_plan() {
  planner::plan p;
  if (job_.plan) {
    p = *job_.plan;
  } else {
    p = planner::make_planner(job_.planner)->make_plan(profile(), full_cluster(),
                                                       job_.batch_size);
    spdlog::info("planner {}: {} stages, {} micro-batches, predicted {:.1f} "
                 "samples/s",
                 job_.planner, p.num_stages(), p.micro_batches,
                 p.predicted_samples_per_s);
  }
  if (p.batch_size == 0)
    p.batch_size = job_.batch_size;
  if (p.batch_size != job_.batch_size)
    throw std::invalid_argument("plan batch size " + std::to_string(p.batch_size)
                                + " differs from the job's "
                                + std::to_string(job_.batch_size));
  check_plan_fits(p, model_, job_.model, static_cast<int>(devices_.size()));
  return p;
}


} // namespace asteroid::actors::detail
