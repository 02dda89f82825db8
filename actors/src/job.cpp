#include "asteroid/actors/job.hpp"

#include "asteroid/actors/heartbeat_monitor.hpp"
#include "asteroid/actors/node.hpp"
#include "asteroid/actors/remote_probe.hpp"
#include "asteroid/actors/replica.hpp"
#include "asteroid/actors/snapshot_store.hpp"
#include "asteroid/actors/stage_state.hpp"
#include "asteroid/data/make_dataset.hpp"
#include "asteroid/data/sampler.hpp"
#include "asteroid/planner/chrome_trace.hpp"
#include "asteroid/planner/cost_model.hpp"
#include "asteroid/planner/json_io.hpp"
#include "asteroid/planner/plan_patch.hpp"
#include "asteroid/planner/planner.hpp"
#include "asteroid/serialization/checkpoint.hpp"
#include "asteroid/serialization/tensor_wire.hpp"
#include "asteroid/training/evaluate.hpp"
#include "asteroid/training/metrics_sink.hpp"
#include "asteroid/training/profiler.hpp"
#include "asteroid/training/progress_line.hpp"

#include <spdlog/spdlog.h>

#include <signal.h>

#include <chrono>
#include <map>
#include <set>
#include <stdexcept>

namespace asteroid::actors {

using nlohmann::json;

namespace {

using clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

double wall_us() {
  return std::chrono::duration<double, std::micro>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

double seconds_between(clock::time_point a, clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

struct replica_ref {
  int stage;
  int replica;
  int device;
  caf::actor handle;
};

/// True when the ranges of `inventory` ({"L0-3": [4, 5], ...}) held at
/// `version` tile [first, end) exactly.
bool tiles(const json& inventory, int first, int end, int64_t version) {
  int at = first;
  while (at < end) {
    int best = at;
    for (auto& [key, versions] : inventory.items()) {
      int a = 0, b = 0;
      if (!snapshot_store::parse_key(key, a, b) || a != at || b > end
          || b <= best)
        continue;
      for (auto& v : versions)
        if (v.is_number_integer() && v.get<int64_t>() == version)
          best = b;
    }
    if (best == at)
      return false;
    at = best;
  }
  return true;
}

/// Where a deployment takes each stage's state from.
struct state_source {
  /// -1: the supervisor's model (first deployment, weights only).
  int64_t version = -1;
  /// Live devices' snapshot inventories: a device that holds its range at
  /// `version` restores locally (nothing is transferred).
  std::map<int, json> inventories;
  /// The whole model's state at `version`, for every other replica.
  serialization::named_tensors full;
};

/// The supervisor: plans, deploys, drives the steps, detects losses and
/// recovers from them (docs/runtime.md, docs/fault_tolerance.md).
class supervisor {
public:
  supervisor(caf::actor_system& sys, const job_spec& job,
             const std::vector<caf::actor>& devices,
             models::sequential_model model,
             std::shared_ptr<data::dataset> train,
             std::shared_ptr<data::dataset> test)
    : sys_(sys), self_(sys), job_(job), devices_(devices),
      model_(std::move(model)), train_(std::move(train)),
      test_(std::move(test)), metrics_(job.metrics_path),
      progress_(job.progress),
      heartbeats_(static_cast<int>(devices.size()),
                  milliseconds(job.fault_tolerance.heartbeat_ms),
                  job.fault_tolerance.heartbeat_misses) {}

  job_result run();

private:
  const fault_tolerance_options& ft() const { return job_.fault_tolerance; }
  std::string who(int d) const {
    return d < static_cast<int>(job_.nodes.size()) ? job_.nodes[d]
                                                   : "device " + std::to_string(d);
  }
  std::string name_of(int d) const { return caps_[d].value("name", who(d)); }
  bool snapshots_on() const {
    return ft().snapshot_every > 0
           && (ft().recovery == "replay" || ft().recovery == "replan");
  }
  void fault_event(const std::string& event, json rec, int device = -1);

  // -- planning --
  void read_capabilities();
  std::optional<planner::model_profile> known_profile();
  const planner::model_profile& profile();
  /// The cluster the planner sees: measured links or the reports, with
  /// drift corrections.
  planner::cluster full_cluster() const;
  planner::cluster reported_cluster() const;
  planner::plan fresh_plan_on_survivors();
  planner::plan initial_plan();

  // -- deployment --
  void link_nodes();
  void deploy(const planner::plan& p, const state_source& src);
  void stop_replicas();
  std::map<int, json> inventories();
  serialization::named_tensors fetch_full_state(
    const std::map<int, json>& inv, int64_t version);
  serialization::named_tensors gather_full_state();

  // -- steps --
  std::set<int> run_step(int64_t step, const data::batch& batch,
                         std::vector<json>& reports);
  void ping_all(clock::time_point now);
  void inject(const fault_spec& f);
  void record_iteration(int64_t step, int64_t epoch, double wall,
                        double t_start, std::vector<json>& reports);

  // -- recovery --
  void drain_losses(int64_t step);
  int64_t recover(const std::set<int>& lost, int64_t failed_step);
  void save_checkpoint(int64_t step);
  bool rejoin(int64_t step);
  bool track_speed(int64_t step, const std::vector<json>& reports);
  void replan_at_boundary(int64_t step, const std::string& event, json rec);

  caf::actor_system& sys_;
  caf::scoped_actor self_;
  const job_spec& job_;
  std::vector<caf::actor> devices_;
  models::sequential_model model_;
  std::shared_ptr<data::dataset> train_;
  std::shared_ptr<data::dataset> test_;
  training::metrics_sink metrics_;
  training::progress_line progress_;
  planner::chrome_trace trace_;
  heartbeat_monitor heartbeats_;
  std::vector<json> caps_;
  std::set<int> dead_;
  std::set<int> returned_; ///< dead devices that answer heartbeats again
  std::set<int> reported_lost_; ///< named in a "recovered" event already
  std::optional<planner::model_profile> profile_;
  /// Measured cluster (capabilities + link matrix), when links are measured.
  std::optional<planner::cluster> links_;
  planner::plan plan_;
  int generation_ = 0;
  std::vector<std::vector<replica_ref>> stages_;
  int num_replicas_ = 0;
  int64_t hb_round_ = 0;
  std::set<size_t> faults_fired_;
  std::map<int, clock::time_point> injected_at_;
  std::optional<clock::time_point> last_fault_; ///< last injected fault
  /// Set by a recovery: the next completed step emits "resumed".
  std::optional<clock::time_point> awaiting_resume_;
  /// The step a fault interrupted: its completion emits "caught_up".
  std::optional<int64_t> catch_up_step_;
  /// Per device: compute seconds per step right after a deployment.
  struct speed_track {
    int generation = -1;
    int seen = 0;
    std::vector<double> baseline;
    int streak = 0;
  };
  std::map<int, speed_track> speed_track_;
  /// Measured speed corrections (drift), multiplied into the cluster.
  std::vector<double> speed_scale_;
  int64_t checkpoint_step_ = -1;
  job_result result_;
};

void supervisor::fault_event(const std::string& event, json rec, int device) {
  rec["event"] = event;
  rec["generation"] = generation_;
  metrics_.emit("fault", rec);
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
    std::string out, err;
    self_->request(devices_[d], timeout, caps_atom::value)
      .receive([&](std::string& s) { out = std::move(s); },
               [&](caf::error& e) { err = sys_.render(e); });
    if (!err.empty())
      throw std::runtime_error("node " + who(static_cast<int>(d))
                               + " did not report capabilities: " + err);
    caps_.push_back(json::parse(out));
  }
}

std::optional<planner::model_profile> supervisor::known_profile() {
  if (profile_ || !job_.profile_path.empty() || !job_.planner.empty())
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
        profile_ = profile_on_node(sys_, devices_.at(job_.profile_node),
                                   job_.model, job_.model_options, popts,
                                   milliseconds(job_.step_timeout_ms));
      } else {
        auto probe = build_model(job_.model, job_.model_options);
        profile_ = training::profile_model(probe, job_.model, popts);
      }
    }
  } catch (const std::exception& e) {
    throw std::runtime_error("planner '" + name + "': profiling model '"
                             + job_.model + "' failed: " + e.what());
  }
  if (profile_->num_layers() != model_->size())
    throw std::invalid_argument(
      "profile of '" + profile_->model + "' has "
      + std::to_string(profile_->num_layers()) + " layers, model '"
      + job_.model + "' has " + std::to_string(model_->size()));
  return *profile_;
}

planner::cluster supervisor::full_cluster() const {
  auto c = links_ ? *links_ : reported_cluster();
  for (size_t d = 0; d < c.devices.size() && d < speed_scale_.size(); ++d)
    c.devices[d].speed *= speed_scale_[d];
  return c;
}

planner::cluster supervisor::reported_cluster() const {
  // Speeds are relative to where the profile was taken.
  double reference = job_.profile_node >= 0
                       ? caps_.at(job_.profile_node).value("slowdown", 1.0)
                       : 1.0;
  std::vector<planner::device_spec> specs;
  for (size_t d = 0; d < devices_.size(); ++d)
    specs.push_back({name_of(static_cast<int>(d)), "local",
                     reference / caps_[d].value("slowdown", 1.0),
                     caps_[d].value("memory_bytes", int64_t{4} << 30),
                     d < job_.nodes.size() ? job_.nodes[d] : ""});
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
  auto c = planner::cluster::uniform("survivors", specs, 1e9);
  for (size_t i = 0; i < alive.size(); ++i)
    for (size_t j = 0; j < alive.size(); ++j) {
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

// -- deployment --------------------------------------------------------------------

void supervisor::link_nodes() {
  auto timeout = milliseconds(job_.connect_timeout_ms) + std::chrono::seconds(5);
  for (size_t d = 0; d < devices_.size(); ++d)
    for (size_t e = 0; e < devices_.size(); ++e) {
      if (d == e || e >= job_.nodes.size() || d >= job_.nodes.size())
        continue;
      auto [host, port] = parse_endpoint(job_.nodes[e]);
      std::string err;
      self_->request(devices_[d], timeout, link_atom::value, host, port)
        .receive([&](std::string& s) { err = s; },
                 [&](caf::error& x) { err = sys_.render(x); });
      if (!err.empty())
        throw std::runtime_error("node " + who(static_cast<int>(d))
                                 + " cannot reach node "
                                 + who(static_cast<int>(e)) + ": " + err);
    }
}

void supervisor::deploy(const planner::plan& p, const state_source& src) {
  const auto P = p.num_stages();
  stages_.assign(P, {});
  num_replicas_ = 0;
  auto window = job_.credit_window > 0 ? job_.credit_window : P + 1;
  auto timeout = milliseconds(job_.connect_timeout_ms) + std::chrono::seconds(30);
  int local = 0, shipped = 0;
  for (int s = 0; s < P; ++s) {
    const auto& st = p.stages[s];
    std::string shared_state; // encoded once per stage, when needed
    auto stage_state = [&]() -> const std::string& {
      if (shared_state.empty()) {
        if (src.version < 0)
          shared_state = serialization::encode_tensors(capture_stage_state(
            model_, st.first_layer, st.end_layer, nullptr));
        else
          shared_state = serialization::encode_tensors(select_stage_state(
            model_, st.first_layer, st.end_layer, src.full));
      }
      return shared_state;
    };
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
      spec.schedule = job_.schedule;
      spec.optimizer = job_.optimizer;
      spec.credit_window = window;
      spec.slowdown = 1.0;
      spec.recv_timeout_ms = job_.step_timeout_ms;
      spec.generation = generation_;
      spec.snapshot_every = snapshots_on() ? ft().snapshot_every : 0;
      auto d = st.devices[r];
      spec.label = "s" + std::to_string(s) + "r" + std::to_string(r) + "@"
                   + name_of(d);
      auto spec_json = to_json(spec);
      std::string state;
      auto inv = src.inventories.find(d);
      if (src.version >= 0 && inv != src.inventories.end()
          && tiles(inv->second, st.first_layer, st.end_layer, src.version)) {
        spec_json["restore_version"] = src.version;
        ++local;
      } else {
        state = stage_state();
        if (src.version >= 0)
          ++shipped;
      }
      std::string err;
      caf::actor handle;
      self_->request(devices_[d], timeout, deploy_atom::value, spec_json.dump(),
                     state)
        .receive(
          [&](std::string& e, caf::actor& a) {
            err = e;
            handle = a;
          },
          [&](caf::error& x) { err = sys_.render(x); });
      if (!err.empty() || !handle)
        throw std::runtime_error("deploying stage " + std::to_string(s)
                                 + " replica " + std::to_string(r) + " on node "
                                 + who(d) + ": " + err);
      self_->monitor(handle);
      stages_[s].push_back({s, static_cast<int>(r), d, handle});
      ++num_replicas_;
      trace_.thread_names[{d, 100 * s + static_cast<int>(r)}]
        = "s" + std::to_string(s) + "r" + std::to_string(r);
    }
  }
  if (src.version >= 0)
    spdlog::info("deployed generation {}: {} replicas restored from their "
                 "node's snapshots, {} shipped",
                 generation_, local, shipped);
  // -- wiring --
  auto me = caf::actor_cast<caf::actor>(self_);
  for (int s = 0; s < P; ++s) {
    auto n = static_cast<int>(stages_[s].size());
    int backup = planner::backup_device(p, s);
    for (auto& r : stages_[s]) {
      self_->send(r.handle, peer_atom::value, int32_t{peer_supervisor},
                  int32_t{0}, me);
      if (s > 0)
        for (auto& q : stages_[s - 1])
          self_->send(r.handle, peer_atom::value, int32_t{peer_prev},
                      static_cast<int32_t>(q.replica), q.handle);
      if (s + 1 < P)
        for (auto& q : stages_[s + 1])
          self_->send(r.handle, peer_atom::value, int32_t{peer_next},
                      static_cast<int32_t>(q.replica), q.handle);
      if (n > 1)
        self_->send(r.handle, peer_atom::value, int32_t{peer_ring_next},
                    int32_t{0}, stages_[s][(r.replica + 1) % n].handle);
      if (r.replica == 0 && backup >= 0 && snapshots_on())
        self_->send(r.handle, peer_atom::value, int32_t{peer_backup},
                    int32_t{0}, devices_[backup]);
    }
  }
  heartbeats_.reset(clock::now());
}

void supervisor::stop_replicas() {
  for (auto& st : stages_)
    for (auto& r : st) {
      self_->demonitor(r.handle);
      self_->send(r.handle, stop_atom::value);
    }
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
    dead_.insert(d);
    heartbeats_.mark_dead(d);
    fault_event("lost_during_recovery", {{"node", name_of(d)}, {"reason", why}}, d);
  };
  while (!waiting.empty()) {
    auto left = std::chrono::duration_cast<milliseconds>(deadline - clock::now());
    if (left.count() <= 0) {
      for (int d : std::set<int>(waiting))
        drop(d, "no inventory within " + std::to_string(heartbeats_.tolerance().count())
                  + " ms");
      break;
    }
    self_->receive(
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
          if (dm.source == devices_[d].address())
            drop(static_cast<int>(d), "connection closed: " + sys_.render(dm.reason));
      },
      caf::others >> [](caf::message_view&) -> caf::result<caf::message> {
        return caf::message{};
      },
      caf::after(left) >> [] {});
  }
  return out;
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
    std::string err, bytes;
    self_->request(devices_[holder], milliseconds(job_.step_timeout_ms),
                   fetch_atom::value, key, version)
      .receive(
        [&](std::string& e, std::string& b) {
          err = std::move(e);
          bytes = std::move(b);
        },
        [&](caf::error& e) { err = sys_.render(e); });
    if (!err.empty())
      throw std::runtime_error("fetching snapshot " + key + " from node "
                               + who(holder) + ": " + err);
    for (auto& [name, t] : serialization::decode_tensors(bytes))
      if (seen.insert(name).second)
        full.emplace_back(name, t);
    at = best;
  }
  return full;
}

serialization::named_tensors supervisor::gather_full_state() {
  serialization::named_tensors full;
  for (auto& st : stages_) {
    std::string bytes, err;
    self_->request(st[0].handle, milliseconds(job_.step_timeout_ms),
                   state_atom::value)
      .receive([&](std::string& b) { bytes = std::move(b); },
               [&](caf::error& e) { err = sys_.render(e); });
    if (!err.empty())
      throw std::runtime_error("collecting stage " + std::to_string(st[0].stage)
                               + " state from node " + who(st[0].device) + ": "
                               + err);
    for (auto& entry : serialization::decode_tensors(bytes))
      full.push_back(std::move(entry));
  }
  return full;
}

// -- steps --------------------------------------------------------------------------

void supervisor::ping_all(clock::time_point now) {
  auto round = heartbeats_.pinged(now);
  hb_round_ = round;
  for (size_t d = 0; d < devices_.size(); ++d)
    self_->send(devices_[d], heartbeat_atom::value,
                round * 4096 + static_cast<int64_t>(d));
}

void supervisor::inject(const fault_spec& f) {
  auto d = f.node;
  json rec{{"node", name_of(d)}, {"action", f.action}, {"step", f.step}};
  if (f.action == "slow") {
    rec["slowdown"] = f.slowdown;
    self_->send(devices_[d], slow_atom::value,
                static_cast<int32_t>(f.slowdown * 1000.0 + 0.5));
  } else {
    auto pid = caps_[d].value("pid", int64_t{-1});
    if (pid <= 0)
      throw std::runtime_error("fault injection: node " + who(d)
                               + " reported no process id");
    int sig = f.action == "kill" ? SIGKILL : f.action == "stop" ? SIGSTOP
                                                                : SIGCONT;
    if (::kill(static_cast<pid_t>(pid), sig) != 0)
      spdlog::error("fault injection: signal to pid {} failed", pid);
    rec["pid"] = pid;
    if (f.action != "cont") {
      injected_at_[d] = clock::now();
      last_fault_ = clock::now();
    }
  }
  fault_event("injected", rec, d);
}

std::set<int> supervisor::run_step(int64_t step, const data::batch& batch,
                                   std::vector<json>& reports) {
  const auto P = plan_.num_stages();
  const auto M = plan_.micro_batches;
  const auto mbs = plan_.micro_batch_size();
  auto t0 = clock::now();
  heartbeats_.catch_up(t0);
  // Feed the first stage's inputs and the last stage's labels.
  std::map<caf::actor, serialization::named_tensors> feed;
  for (int s : {0, P - 1}) {
    int64_t at = 0;
    for (size_t r = 0; r < plan_.stages[s].shares.size(); ++r) {
      auto share = plan_.stages[s].shares[r];
      auto& list = feed[stages_[s][r].handle];
      for (int m = 0; m < M; ++m) {
        auto b0 = m * mbs + at, b1 = b0 + share;
        if (s == 0)
          list.emplace_back("x" + std::to_string(m), batch.inputs.slice(0, b0, b1));
        if (s == P - 1)
          list.emplace_back("y" + std::to_string(m), batch.targets.slice(0, b0, b1));
      }
      at += share;
    }
    if (P == 1)
      break;
  }
  for (auto& [h, list] : feed)
    self_->send(h, load_atom::value, step, serialization::encode_tensors(list));
  for (auto& st : stages_)
    for (auto& r : st)
      self_->send(r.handle, start_atom::value, step);
  // Faults scripted for this step, and those whose step ended before their
  // delay ran out (they fire at once).
  std::vector<std::pair<clock::time_point, size_t>> due;
  for (size_t i = 0; i < job_.faults.size(); ++i)
    if (job_.faults[i].step <= step && !faults_fired_.count(i))
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
    if (heartbeats_.due(now))
      ping_all(now);
    for (int d : heartbeats_.newly_dead(now))
      lose(d, "no heartbeat for "
                + std::to_string(heartbeats_.tolerance().count()) + " ms");
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
    self_->receive(
      [&](done_atom, int64_t s, std::string& text) {
        auto rep = json::parse(text);
        if (s == step && rep.value("generation", -1) == generation_)
          reports.push_back(std::move(rep));
      },
      [&](fail_atom, int32_t gen, std::string& what) {
        if (gen == generation_)
          failure = what;
      },
      [&](heartbeat_atom, int64_t seq) {
        auto d = static_cast<int>(seq % 4096);
        if (d < 0 || d >= static_cast<int>(devices_.size()))
          return;
        if (heartbeats_.dead(d)) {
          if (!returned_.count(d) && seq / 4096 == hb_round_) {
            returned_.insert(d);
            fault_event("answering_again", {{"node", name_of(d)}}, d);
          }
          return;
        }
        heartbeats_.answered(d, seq / 4096, clock::now());
      },
      [&](caf::down_msg& dm) {
        for (size_t d = 0; d < devices_.size(); ++d)
          if (dm.source == devices_[d].address())
            lose(static_cast<int>(d), "connection closed: " + sys_.render(dm.reason));
        for (auto& st : stages_)
          for (auto& r : st)
            if (dm.source == r.handle.address())
              lose(r.device, "replica s" + std::to_string(r.stage) + "r"
                               + std::to_string(r.replica) + " went down: "
                               + sys_.render(dm.reason));
      },
      // Late answers and messages of replaced replicas: drop, do not let
      // them pile up in the mailbox.
      caf::others >> [](caf::message_view&) -> caf::result<caf::message> {
        return caf::message{};
      },
      caf::after(wait) >> [] {});
  }
  if (!failure.empty())
    throw std::runtime_error(failure);
  return lost;
}

void supervisor::record_iteration(int64_t step, int64_t epoch, double wall,
                                  double t_start, std::vector<json>& reports) {
  const auto P = plan_.num_stages();
  double loss = 0;
  json links = json::object();
  json reps = json::array();
  for (auto& rep : reports) {
    if (rep["stage"] == P - 1)
      loss += rep["loss"].get<double>();
    for (auto& [k, v] : rep["bytes"].items())
      links[k] = v;
    int s = rep["stage"], r = rep["replica"];
    int d = stages_[s][r].device;
    reps.push_back({{"replica", rep["label"]},
                    {"stage", s},
                    {"busy_s", rep["busy_s"]},
                    {"idle_s", std::max(0.0, wall - rep["busy_s"].get<double>())},
                    {"max_unacked", rep["max_unacked"]}});
    if (step < job_.trace_steps)
      for (auto& ev : rep["events"])
        trace_.events.push_back({ev["name"].get<std::string>(), "compute",
                                 ev["ts"].get<double>() - t_start,
                                 ev["dur"].get<double>(), d, 100 * s + r,
                                 {{"step", step}}});
  }
  const auto B = plan_.batch_size;
  json rec{{"step", step + 1},       {"epoch", epoch},
           {"loss", loss},           {"seconds", wall},
           {"samples_per_s", B / wall}, {"replicas", reps},
           {"link_bytes", links},    {"generation", generation_}};
  metrics_.emit("iteration", rec);
  result_.iterations.push_back(rec);
  result_.last_loss = loss;
}

// -- recovery -------------------------------------------------------------------------

void supervisor::save_checkpoint(int64_t step) {
  serialization::checkpoint ck;
  ck.model_state = gather_full_state();
  ck.step = step;
  ck.model_name = job_.model;
  ck.model_options_json = job_.model_options.dump();
  ck.metadata = "asteroid job supervisor: stage states before step "
                + std::to_string(step);
  serialization::save_checkpoint(ft().checkpoint_path, ck);
  checkpoint_step_ = step;
}

void supervisor::drain_losses(int64_t step) {
  // Devices often fail together (a switch, a power strip): take every loss
  // already reported before planning around the first one. Everything else
  // in the mailbox belongs to the generation being replaced.
  bool more = true;
  while (more)
    self_->receive(
      [&](caf::down_msg& dm) {
        for (size_t d = 0; d < devices_.size(); ++d)
          if (dm.source == devices_[d].address() && !dead_.count(static_cast<int>(d))) {
            dead_.insert(static_cast<int>(d));
            fault_event("detected",
                        {{"node", name_of(static_cast<int>(d))},
                         {"step", step},
                         {"reason", "connection closed: " + sys_.render(dm.reason)}},
                        static_cast<int>(d));
          }
      },
      caf::others >> [](caf::message_view&) -> caf::result<caf::message> {
        return caf::message{};
      },
      caf::after(milliseconds(0)) >> [&] { more = false; });
}

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
  drain_losses(failed_step);
  for (int d : dead_)
    if (!lost.count(d) && !heartbeats_.dead(d))
      heartbeats_.mark_dead(d);
  auto mode = ft().recovery;
  if (mode == "none" || (mode != "restart" && ft().snapshot_every == 0))
    throw std::runtime_error("node " + who(*lost.begin())
                             + " was lost at step " + std::to_string(failed_step)
                             + " and recovery is off");
  stop_replicas();
  ++generation_;
  state_source src;
  planner::plan next;
  std::vector<std::string> changes;
  if (mode == "restart") {
    if (ft().checkpoint_path.empty() || checkpoint_step_ < 0)
      throw std::runtime_error("restart recovery: no checkpoint was written");
    // From scratch, as a restarted job would: profile and plan again.
    if (job_.profile_path.empty())
      profile_.reset();
    auto ck = serialization::load_checkpoint(ft().checkpoint_path);
    src.version = ck.step;
    src.full = std::move(ck.model_state);
    next = fresh_plan_on_survivors();
  } else {
    src.inventories = inventories();
    // The newest version at which the live snapshots cover every layer.
    std::set<int64_t, std::greater<>> versions;
    json all = json::object();
    for (auto& [d, items] : src.inventories)
      for (auto& [k, vs] : items.items())
        for (auto& v : vs) {
          versions.insert(v.get<int64_t>());
          all[k].push_back(v);
        }
    src.version = -1;
    for (auto v : versions)
      if (tiles(all, 0, static_cast<int>(model_->size()), v)) {
        src.version = v;
        break;
      }
    if (src.version < 0)
      throw std::runtime_error("cannot recover from the loss of "
                               + json(names).dump()
                               + ": no live device holds a replica of every "
                                 "layer");
    if (mode == "replay") {
      auto prof = known_profile();
      auto patch = planner::patch_plan(plan_, dead_, full_cluster(), prof);
      next = patch.patched;
      changes = patch.changes;
      if (prof) {
        auto fresh = fresh_plan_on_survivors();
        if (next.predicted_round_s > ft().replan_threshold * fresh.predicted_round_s
            || !planner::fits_memory(next, full_cluster())) {
          changes.push_back("patched plan predicted "
                            + std::to_string(next.predicted_round_s)
                            + " s per round vs fresh "
                            + std::to_string(fresh.predicted_round_s)
                            + " s: heavy re-plan instead");
          next = fresh;
          mode = "replan(threshold)";
        }
      }
    } else {
      next = fresh_plan_on_survivors();
    }
    bool all_local = true;
    for (auto& st : next.stages)
      for (int d : st.devices)
        if (!tiles(src.inventories[d], st.first_layer, st.end_layer, src.version))
          all_local = false;
    if (!all_local)
      src.full = fetch_full_state(src.inventories, src.version);
  }
  check_plan_fits(next, model_, job_.model, static_cast<int>(devices_.size()));
  deploy(next, src);
  plan_ = next;
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
               {"recover_s", seconds_between(t_begin, clock::now())},
               {"stages", plan_.num_stages()},
               {"plan", json(plan_)},
               {"changes", changes}});
  return src.version;
}

void supervisor::replan_at_boundary(int64_t step, const std::string& event,
                                    json rec) {
  auto t_begin = clock::now();
  // The state after the last completed step, straight from the replicas.
  state_source src;
  src.version = step;
  src.full = gather_full_state();
  stop_replicas();
  ++generation_;
  auto next = fresh_plan_on_survivors();
  deploy(next, src);
  plan_ = next;
  rec["step"] = step;
  rec["recover_s"] = seconds_between(t_begin, clock::now());
  rec["plan"] = json(plan_);
  fault_event(event, rec);
}

bool supervisor::rejoin(int64_t step) {
  // A device that answers again is admitted at this mini-batch boundary.
  std::set<int> back;
  for (int d : returned_)
    if (dead_.count(d))
      back.insert(d);
  returned_.clear();
  if (back.empty() || !snapshots_on() || !known_profile())
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
  if (ft().drift_factor <= 1.0 || !snapshots_on() || !known_profile())
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
    bool off = r > ft().drift_factor || r < 1.0 / ft().drift_factor;
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

// -- the run ---------------------------------------------------------------------------

job_result supervisor::run() {
  read_capabilities();
  speed_scale_.assign(devices_.size(), 1.0);
  if (!job_.plan && job_.measure_links
      && job_.nodes.size() == devices_.size()) {
    link_probe_options lp;
    lp.timeout = milliseconds(job_.connect_timeout_ms) + std::chrono::seconds(5);
    links_ = measure_cluster(sys_, devices_, job_.nodes,
                             std::max(job_.profile_node, 0), lp);
    if (job_.profile_node < 0) // profiled here, at slowdown 1
      for (size_t d = 0; d < devices_.size(); ++d)
        links_->devices[d].speed = 1.0 / caps_[d].value("slowdown", 1.0);
    metrics_.emit("links", {{"cluster", json(*links_)}});
  }
  plan_ = initial_plan();
  link_nodes();
  if (ft().recovery == "restart" && ft().checkpoint_path.empty())
    throw std::invalid_argument("fault_tolerance: recovery 'restart' needs "
                                "a 'checkpoint' file");
  // Profile now, not in the middle of a recovery (the restart baseline
  // re-profiles on purpose: it starts from scratch).
  if (snapshots_on())
    known_profile();
  state_source initial;
  deploy(plan_, initial);
  for (size_t d = 0; d < devices_.size(); ++d) {
    trace_.process_names[static_cast<int>(d)] = name_of(static_cast<int>(d));
    trace_.thread_names[{static_cast<int>(d), 999}] = "faults";
  }
  const auto B = plan_.batch_size;
  data::sampler order{train_->size(), job_.seed};
  auto per_epoch = train_->size() / B;
  if (per_epoch < 1)
    throw std::invalid_argument("dataset has fewer samples than one batch");
  int64_t total_steps = job_.epochs * per_epoch;
  if (job_.max_steps >= 0)
    total_steps = std::min(total_steps, job_.max_steps);
  metrics_.emit("start", {{"model", job_.model},
                          {"stages", plan_.num_stages()},
                          {"micro_batches", plan_.micro_batches},
                          {"batch_size", B},
                          {"replicas", num_replicas_},
                          {"steps", total_steps},
                          {"recovery", ft().recovery}});
  result_.plan = plan_;
  auto t_start = wall_us();
  int64_t step = 0;
  int64_t cached_epoch = -1;
  std::vector<std::vector<int64_t>> batches;
  try {
    while (step < total_steps) {
      auto epoch = step / per_epoch;
      if (epoch != cached_epoch) {
        batches = order.batches(epoch, B, true);
        cached_epoch = epoch;
      }
      if (ft().recovery == "restart" && step % ft().checkpoint_every == 0
          && step != checkpoint_step_)
        save_checkpoint(step);
      rejoin(step);
      auto t0 = wall_us();
      auto batch = train_->get_batch(batches[static_cast<size_t>(step % per_epoch)]);
      std::vector<json> reports;
      auto lost = run_step(step, batch, reports);
      if (!lost.empty()) {
        step = recover(lost, step);
        continue;
      }
      auto t1 = wall_us();
      record_iteration(step, epoch, (t1 - t0) * 1e-6, t_start, reports);
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
      if (step < total_steps)
        track_speed(step, reports);
      auto elapsed = (t1 - t_start) * 1e-6;
      progress_.update("step " + std::to_string(step) + "/"
                         + std::to_string(total_steps),
                       step * B, total_steps * B,
                       elapsed > 0 ? step * B / elapsed : 0.0, result_.last_loss);
    }
  } catch (...) {
    progress_.finish();
    stop_replicas();
    throw;
  }
  progress_.finish();
  result_.steps = step;
  result_.seconds = (wall_us() - t_start) * 1e-6;
  result_.samples_per_s = result_.seconds > 0 ? step * B / result_.seconds : 0;
  result_.plan = plan_;
  // -- gather the weights --
  serialization::named_tensors full;
  try {
    full = gather_full_state();
  } catch (...) {
    stop_replicas();
    throw;
  }
  stop_replicas();
  load_stage_state(model_, 0, static_cast<int>(model_->size()), nullptr, full);
  result_.model = model_;
  if (test_ && job_.evaluate)
    result_.test = training::evaluate(model_, *test_, 500, job_.test_limit);
  metrics_.emit("done", {{"steps", result_.steps},
                         {"seconds", result_.seconds},
                         {"samples_per_s", result_.samples_per_s},
                         {"loss", result_.last_loss},
                         {"test_accuracy", result_.test.accuracy},
                         {"faults", result_.fault_events.size()}});
  for (auto& ev : trace_.events)
    if (ev.category == "fault")
      ev.start_us -= t_start;
  if (!job_.trace_path.empty())
    planner::write_chrome_trace(trace_, job_.trace_path);
  return result_;
}

} // namespace

job_result run_job(caf::actor_system& sys, const job_spec& job,
                   const std::vector<caf::actor>& devices,
                   models::sequential_model model,
                   std::shared_ptr<data::dataset> train,
                   std::shared_ptr<data::dataset> test) {
  supervisor sup{sys, job, devices, std::move(model), std::move(train),
                 std::move(test)};
  return sup.run();
}

job_result run_job(const job_spec& job) {
  // -- data --
  data::dataset_options dopts;
  dopts.path = job.data_dir;
  dopts.count = job.synthetic_count;
  dopts.seed = job.seed;
  auto train = data::make_dataset(job.dataset, dopts);
  std::shared_ptr<data::dataset> test;
  if (job.evaluate) {
    auto topts = dopts;
    topts.split = data::split::test;
    topts.seed = job.seed + 1;
    topts.count = std::max<int64_t>(job.synthetic_count / 4, 1);
    test = data::make_dataset(job.dataset, topts);
  }
  if (job.train_limit > 0 && job.train_limit < train->size()) {
    auto b = train->get_range(0, job.train_limit);
    train = std::make_shared<data::tensor_dataset>(
      b.inputs, b.targets, train->num_classes(), train->name());
  }
  // -- model: the dataset decides classes and input shape --
  auto spec = job;
  auto shape = train->sample_shape();
  if (!spec.model_options.contains("num_classes"))
    spec.model_options["num_classes"] = train->num_classes();
  if (shape.size() == 3) {
    if (!spec.model_options.contains("in_channels"))
      spec.model_options["in_channels"] = shape[0];
    if (!spec.model_options.contains("image_size"))
      spec.model_options["image_size"] = shape[1];
  }
  torch::manual_seed(job.seed);
  auto model = build_model(job.model, spec.model_options);
  // -- nodes --
  caf::actor_system_config cfg;
  configure(cfg);
  caf::actor_system sys{cfg};
  std::vector<caf::actor> devices;
  for (auto& n : job.nodes) {
    auto [host, port] = parse_endpoint(n);
    devices.push_back(
      connect(sys, host, port, std::chrono::milliseconds(job.connect_timeout_ms)));
  }
  return run_job(sys, spec, devices, model, train, test);
}

job_result run_job_file(const std::string& path) {
  return run_job(load_job_file(path));
}

} // namespace asteroid::actors
