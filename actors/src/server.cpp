// The inference server's actor (server.hpp): start (claim, plan, deploy,
// wire), then requests in, outputs out in request order.
#include "asteroid/actors/server.hpp"

#include "asteroid/actors/data_plane.hpp"
#include "asteroid/actors/heartbeat_monitor.hpp"
#include "asteroid/actors/inference_spec.hpp"
#include "asteroid/actors/inference_stage.hpp"
#include "asteroid/actors/stage_state.hpp"
#include "asteroid/kernels/wire_codec.hpp"
#include "asteroid/planner/inference_planner.hpp"
#include "asteroid/planner/json_io.hpp"
#include "asteroid/serialization/tensor_wire.hpp"
#include "asteroid/training/model_registry.hpp"
#include "asteroid/training/profiler.hpp"
#include "job_claim.hpp"
#include "unexpected.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>

namespace asteroid::actors {

namespace {

using nlohmann::json;
using server_clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

struct request_entry {
  int64_t id = 0;
  int64_t rows = 0;
  std::string input;
  caf::typed_response_promise<std::string, std::string> promise;
  server_clock::time_point arrived;
  server_clock::time_point sent;
};

enum class server_phase { idle, starting, serving, recovering, failed, stopped };

struct server_state {
  server_options opts;
  std::vector<device_actor> devices;
  models::sequential_model model{nullptr};
  int64_t job = 0;
  server_phase phase = server_phase::idle;
  std::string failure;
  /// The answer to `start_atom`, until the server serves or fails.
  std::optional<caf::typed_response_promise<std::string, std::string>> started;
  std::vector<json> caps;
  std::vector<int> claimed;
  /// Devices lost while serving: the plans after a loss leave them out.
  std::set<int> dead;
  /// Bumped by every recovery: stages stamp their outputs with it, and an
  /// output of an older pipeline (a request it computed before the loss,
  /// answered again by the new one) is dropped.
  int64_t generation = 1;
  std::optional<planner::model_profile> profile;
  std::optional<server_clock::time_point> recovering_since;
  /// The server's clock (tick: heartbeats, timeouts) runs: from the claim
  /// until the server fails or stops.
  bool ticking = false;
  /// Watches the claimed nodes from the claim on (indices: devices).
  std::optional<heartbeat_monitor> heartbeats;
  std::vector<json> recoveries;
  planner::inference_plan plan;
  std::vector<inference_stage_actor> stages;
  int window = 1;
  /// The model's input per sample, and its dtype: what a request must be.
  models::shape_t sample_shape;
  torch::Dtype input_dtype = torch::kFloat32;
  int64_t next_id = 0;
  int64_t next_answer = 0;
  std::deque<request_entry> waiting;
  std::map<int64_t, request_entry> in_flight;
  /// Computed, waiting for an earlier request's answer.
  std::map<int64_t, std::pair<request_entry, std::string>> done;
  int64_t answered = 0;
  int64_t samples = 0;
  std::optional<server_clock::time_point> first_sent;
  server_clock::time_point last_answer;
  std::deque<double> latencies_ms;
};

using server_self = server_actor::stateful_pointer<server_state>;

std::string who(const server_state& st, int d) {
  if (d >= 0 && static_cast<size_t>(d) < st.caps.size() && st.caps[d].contains("name"))
    return st.caps[d]["name"].get<std::string>();
  if (d >= 0 && static_cast<size_t>(d) < st.opts.nodes.size())
    return st.opts.nodes[d];
  return "device " + std::to_string(d);
}

/// Calls `each(d, done)` for every device at once; `done(err)` reports one
/// device's outcome. `then` runs once, with the first error or "" when all
/// succeeded.
void for_each_device(server_self self,
                     const std::function<void(int, std::function<void(std::string)>)>& each,
                     std::function<void(std::string)> then) {
  const int n = static_cast<int>(self->state.devices.size());
  auto left = std::make_shared<int>(n);
  auto finished = std::make_shared<bool>(false);
  for (int d = 0; d < n; ++d)
    each(d, [=](std::string err) {
      if (*finished)
        return;
      if (!err.empty() || --*left == 0) {
        *finished = true;
        then(std::move(err));
      }
    });
}

void release_nodes(server_self self) {
  auto& st = self->state;
  for (int d : st.claimed)
    self->send(st.devices[d], release_atom::value, st.job);
  st.claimed.clear();
}

void stop_stages(server_self self) {
  for (auto& s : self->state.stages) {
    if (!s) // not built yet: a deployment's late answer stops it
      continue;
    self->demonitor(s.address());
    self->send(s, stop_atom::value);
  }
  self->state.stages.clear();
}

bool ended(const server_state& st) {
  return st.phase == server_phase::failed || st.phase == server_phase::stopped;
}

/// Ends serving: every request not answered gets `why`.
void fail(server_self self, const std::string& why, server_phase to = server_phase::failed) {
  auto& st = self->state;
  if (ended(st))
    return;
  if (to == server_phase::failed)
    spdlog::error("server: {}", why);
  st.phase = to;
  st.failure = why;
  if (st.started) {
    st.started->deliver(why, std::string{});
    st.started.reset();
  }
  auto refuse = [&](request_entry& r) {
    r.promise.deliver("request " + std::to_string(r.id) + " not answered: " + why,
                      std::string{});
  };
  for (auto& [id, r] : st.in_flight)
    refuse(r);
  for (auto& [id, r] : st.done)
    refuse(r.first);
  for (auto& r : st.waiting)
    refuse(r);
  st.in_flight.clear();
  st.done.clear();
  st.waiting.clear();
  stop_stages(self);
  release_nodes(self);
}

/// Sends request `r` into the pipeline. Its input stays with it until it is
/// answered: a recovery sends it again.
void send_request(server_self self, request_entry& r) {
  auto& st = self->state;
  serialization::tensor_message m;
  m.kind = serialization::tensor_kind::input;
  m.job = st.job;
  m.generation = st.generation;
  m.step = r.id;
  m.payload = r.input;
  r.sent = server_clock::now();
  if (!st.first_sent)
    st.first_sent = r.sent;
  self->send(st.stages.front(), tensor_atom::value, std::move(m));
}

void pump(server_self self) {
  auto& st = self->state;
  if (st.phase != server_phase::serving)
    return;
  while (!st.waiting.empty() && static_cast<int>(st.in_flight.size()) < st.window) {
    auto r = std::move(st.waiting.front());
    st.waiting.pop_front();
    send_request(self, r);
    auto id = r.id;
    st.in_flight.emplace(id, std::move(r));
  }
}

void answer_in_order(server_self self) {
  auto& st = self->state;
  for (auto it = st.done.find(st.next_answer); it != st.done.end();
       it = st.done.find(st.next_answer)) {
    it->second.first.promise.deliver(std::string{}, std::move(it->second.second));
    st.done.erase(it);
    ++st.next_answer;
  }
}

/// How often the server's clock ticks: each heartbeat, and at least twice
/// a second for the timeouts.
milliseconds tick_period(const server_state& st) {
  return std::min(milliseconds(500), milliseconds(st.opts.heartbeat_ms));
}

/// Pings every node the server holds and not yet lost; an answer restarts
/// the node's clock, silence is what heartbeat_monitor::newly_dead counts.
void ping_nodes(server_self self, server_clock::time_point now) {
  auto& st = self->state;
  auto& hb = *st.heartbeats;
  const auto round = hb.pinged(now);
  for (int d : st.claimed) {
    if (hb.dead(d))
      continue;
    self->request(st.devices[d], hb.tolerance(), heartbeat_atom::value, round)
      .then(
        [=](heartbeat_atom, int64_t seq) {
          if (auto& monitor = self->state.heartbeats)
            monitor->answered(d, seq, server_clock::now());
        },
        [](caf::error&) {});
  }
}

/// The cluster of the devices not lost, and which device each of its
/// devices is.
std::pair<planner::cluster, std::vector<int>> cluster_of(const server_state& st) {
  std::vector<planner::device_spec> specs;
  std::vector<int> alive;
  for (size_t d = 0; d < st.caps.size(); ++d) {
    if (st.dead.count(static_cast<int>(d)))
      continue;
    alive.push_back(static_cast<int>(d));
    specs.push_back({who(st, static_cast<int>(d)), "local",
                     1.0 / st.caps[d].value("slowdown", 1.0),
                     st.caps[d].value("memory_bytes", int64_t{4} << 30),
                     d < st.opts.nodes.size() ? st.opts.nodes[d] : ""});
  }
  auto c = planner::cluster::uniform("serve", specs, 1e9);
  if (const auto& links = st.opts.links)
    for (size_t i = 0; i < alive.size(); ++i)
      for (size_t j = 0; j < alive.size(); ++j) {
        c.bandwidth_Bps[i][j] = links->bandwidth(alive[i], alive[j]);
        c.latency_s[i][j] = links->latency(alive[i], alive[j]);
      }
  c.activation_wire_ratio
    = kernels::wire_ratio(kernels::parse_wire_codec(st.opts.activation_codec));
  return {c, alive};
}

planner::inference_plan make_plan(server_state& st) {
  const int n = static_cast<int>(st.devices.size());
  planner::inference_options io;
  io.micro_batch = st.opts.micro_batch;
  // The caller's stages, until a loss: then the planner places the model
  // on the survivors.
  if (!st.opts.plan.stages.empty() && st.dead.empty()) {
    auto p = st.opts.plan;
    p.micro_batch = st.opts.micro_batch;
    int at = 0;
    std::vector<bool> used(static_cast<size_t>(n), false);
    for (size_t s = 0; s < p.stages.size(); ++s) {
      const auto& stage = p.stages[s];
      const auto where = "plan: stage " + std::to_string(s) + ": ";
      if (stage.first_layer != at || stage.end_layer <= stage.first_layer)
        throw std::invalid_argument(where + "layers [" + std::to_string(stage.first_layer)
                                    + ", " + std::to_string(stage.end_layer)
                                    + ") do not follow the previous stage's (next layer "
                                    + std::to_string(at) + ")");
      if (stage.device < 0 || stage.device >= n || used[stage.device])
        throw std::invalid_argument(where + "device " + std::to_string(stage.device)
                                    + " is not one of the " + std::to_string(n)
                                    + " nodes, or runs another stage already");
      used[stage.device] = true;
      at = stage.end_layer;
    }
    if (at != st.model->size())
      throw std::invalid_argument("plan: the stages end at layer " + std::to_string(at)
                                  + ", but model '" + st.opts.model + "' has "
                                  + std::to_string(st.model->size()) + " layers");
    return p;
  }
  if (!st.profile) {
    auto profile = st.opts.profile ? *st.opts.profile
                   : !st.opts.profile_path.empty()
                     ? planner::load_model_profile_file(st.opts.profile_path)
                     : profile_for_serving(st.opts.model, st.opts.model_options,
                                           st.opts.micro_batch);
    if (profile.num_layers() != st.model->size())
      throw std::invalid_argument("profile of '" + profile.model + "' has "
                                  + std::to_string(profile.num_layers())
                                  + " layers, model '" + st.opts.model + "' has "
                                  + std::to_string(st.model->size()));
    st.profile = std::move(profile);
  }
  auto [c, alive] = cluster_of(st);
  if (alive.empty())
    throw std::runtime_error("no node left to serve on");
  // Memory for the requests a stage may hold: as many as can be in flight.
  io.queue_depth = st.opts.max_in_flight > 0 ? st.opts.max_in_flight : n + 1;
  // After a loss the caller's plan is gone: the survivors get EdgePipe's.
  const auto name = st.dead.empty() || st.opts.plan.stages.empty() ? st.opts.planner
                                                                     : std::string("edgepipe");
  planner::inference_plan p;
  if (name == "edgepipe") {
    p = planner::plan_inference(*st.profile, c, io);
  } else if (name == "straight") {
    p = planner::plan_inference_straight(*st.profile, c, io);
    if (!planner::inference_fits_memory(p, c))
      throw std::invalid_argument("planner 'straight': a stage does not fit its "
                                  "device's memory budget");
  } else if (name == "on-device") {
    p = planner::plan_inference_on_device(*st.profile, c, io);
  } else {
    throw std::invalid_argument("planner '" + name
                                + "' is not an inference planner (edgepipe, straight, "
                                  "on-device)");
  }
  for (auto& stage : p.stages)
    stage.device = alive.at(static_cast<size_t>(stage.device));
  return p;
}

std::string data_endpoint_of(const server_state& st, int d) {
  if (!st.opts.data_plane || d < 0 || static_cast<size_t>(d) >= st.opts.nodes.size())
    return {};
  auto port = st.caps[d].value("data_port", int64_t{0});
  return port > 0 ? data_endpoint(st.opts.nodes[d], port) : std::string{};
}

/// Wires every stage to the next and the last to the server, then serves.
void wire(server_self self) {
  auto& st = self->state;
  const auto generation = st.generation;
  const int S = st.plan.num_stages();
  auto left = std::make_shared<int>(S);
  auto finished = std::make_shared<bool>(false);
  auto timeout = milliseconds(st.opts.request_timeout_ms);
  for (int s = 0; s < S; ++s) {
    const bool last = s + 1 == S;
    auto to = last ? caf::actor_cast<caf::actor>(self)
                   : caf::actor_cast<caf::actor>(st.stages[s + 1]);
    auto endpoint = last ? std::string{} : data_endpoint_of(st, st.plan.stages[s + 1].device);
    auto on = [=](std::string err) mutable {
      // A loss meanwhile started another pipeline (this one is stopped), or
      // the server failed or was stopped.
      if (*finished || self->state.generation != generation || ended(self->state))
        return;
      if (!err.empty() || --*left == 0) {
        *finished = true;
        if (!err.empty())
          return fail(self, "wiring stage " + std::to_string(s) + ": " + err);
        auto& st = self->state;
        const bool recovered = st.recovering_since.has_value();
        st.phase = server_phase::serving;
        if (st.started) {
          json j;
          to_json(j, st.plan);
          st.started->deliver(std::string{}, j.dump());
          st.started.reset();
        }
        if (recovered) {
          // Every request the lost pipeline held goes through the new one,
          // in order; answers of the old one are dropped by generation.
          auto seconds = std::chrono::duration<double>(server_clock::now()
                                                       - *st.recovering_since)
                           .count();
          st.recoveries.back()["seconds"] = seconds;
          st.recoveries.back()["requests_sent_again"] = st.in_flight.size();
          st.recoveries.back()["stages"] = S;
          st.recovering_since.reset();
          spdlog::warn("server: recovered in {:.3f} s on {} stages; sending {} requests "
                       "again",
                       seconds, S, st.in_flight.size());
          for (auto& [id, r] : st.in_flight)
            send_request(self, r);
          pump(self);
          return;
        }
        spdlog::info("server: serving on {} stages, {} requests in flight at most", S,
                     st.window);
      }
    };
    self
      ->request(st.stages[s], timeout, peer_atom::value,
                static_cast<int32_t>(last ? peer_supervisor : peer_next), int32_t{0}, to,
                endpoint)
      .then([=](std::string& err) mutable { on(err); },
            [=](caf::error& err) mutable { on(self->system().render(err)); });
  }
}

void deploy(server_self self) {
  auto& st = self->state;
  const int S = st.plan.num_stages();
  const auto generation = st.generation;
  // Fixed at the first deployment: a recovery sends every request in
  // flight again, and the new stages' queues must hold them all.
  if (generation == 1)
    st.window = st.opts.max_in_flight > 0 ? st.opts.max_in_flight : S + 1;
  st.stages.assign(static_cast<size_t>(S), inference_stage_actor{});
  auto left = std::make_shared<int>(S);
  auto finished = std::make_shared<bool>(false);
  for (int s = 0; s < S; ++s) {
    const auto& stage = st.plan.stages[s];
    inference_spec spec;
    spec.model = st.opts.model;
    spec.model_options = st.opts.model_options;
    spec.stage = s;
    spec.num_stages = S;
    spec.first_layer = stage.first_layer;
    spec.end_layer = stage.end_layer;
    spec.micro_batch = st.opts.micro_batch;
    spec.queue_limit = st.window;
    spec.activation_codec = st.opts.activation_codec;
    spec.job = st.job;
    spec.generation = generation;
    spec.label = "s" + std::to_string(s) + "@" + who(st, stage.device);
    auto weights = serialization::encode_tensors(
      capture_stage_state(st.model, stage.first_layer, stage.end_layer, nullptr));
    auto on = [=](std::string err, caf::actor a) mutable {
      if (self->state.generation != generation || ended(self->state)) {
        // Built for a pipeline a later loss replaced, or for a server that
        // failed or was stopped meanwhile.
        if (a)
          self->send(caf::actor_cast<inference_stage_actor>(a), stop_atom::value);
        return;
      }
      if (*finished)
        return;
      if (err.empty() && !a)
        err = "the node answered with no stage";
      if (err.empty()) {
        self->state.stages[s] = caf::actor_cast<inference_stage_actor>(a);
        self->monitor(a);
      }
      if (!err.empty() || --*left == 0) {
        *finished = true;
        if (!err.empty())
          return fail(self, "deploying stage " + std::to_string(s) + ": " + err);
        wire(self);
      }
    };
    self
      ->request(st.devices[stage.device], milliseconds(st.opts.request_timeout_ms),
                serve_atom::value, to_json(spec).dump(), std::move(weights))
      .then([=](std::string& err, caf::actor& a) mutable { on(err, a); },
            [=](caf::error& err) mutable { on(self->system().render(err), caf::actor{}); });
  }
}

/// Device `d` was lost while serving: re-plan on the survivors, build and
/// wire the new stages, then send the requests in flight again (wire).
void recover(server_self self, int d, const std::string& why) {
  auto& st = self->state;
  if (!st.opts.recover)
    return fail(self, why);
  st.dead.insert(d);
  bool runs_a_stage = false;
  for (const auto& stage : st.plan.stages)
    runs_a_stage = runs_a_stage || stage.device == d;
  if (!runs_a_stage && st.phase == server_phase::serving) {
    // Nothing of the pipeline was there: it goes on as it is.
    st.recoveries.push_back({{"lost", who(st, d)}, {"why", why},
                             {"generation", st.generation}, {"pipeline_kept", true}});
    spdlog::warn("server: {}; it ran no stage, the pipeline goes on", why);
    return;
  }
  ++st.generation;
  if (!st.recovering_since)
    st.recovering_since = server_clock::now();
  st.phase = server_phase::recovering; // bounded by the tick
  st.recoveries.push_back({{"lost", who(st, d)}, {"why", why},
                           {"generation", st.generation},
                           {"in_flight", st.in_flight.size()}});
  spdlog::warn("server: {}; re-planning on the {} nodes left", why,
               st.devices.size() - st.dead.size());
  stop_stages(self);
  try {
    st.plan = make_plan(st);
  } catch (const std::exception& e) {
    return fail(self, why + "; no pipeline on the nodes left: " + e.what());
  }
  deploy(self);
}

/// Node `d` is gone (`why`): before a plan there is nothing to plan around,
/// and the start fails; after, the pipeline is planned around it.
void node_lost(server_self self, int d, const std::string& why) {
  auto& st = self->state;
  if (st.dead.count(d))
    return;
  if (st.heartbeats)
    st.heartbeats->mark_dead(d);
  if (st.phase == server_phase::starting && st.plan.stages.empty())
    return fail(self, why);
  recover(self, d, why);
}

void start(server_self self) {
  auto& st = self->state;
  st.phase = server_phase::starting;
  st.job = detail::draw_job_id();
  const auto timeout = milliseconds(st.opts.connect_timeout_ms);
  st.caps.assign(st.devices.size(), json::object());
  for (auto& d : st.devices)
    self->monitor(d);
  auto failed = [=](const std::string& why) { fail(self, why); };
  for_each_device(
    self,
    [=](int d, std::function<void(std::string)> done) {
      self->request(self->state.devices[d], timeout, caps_atom::value)
        .then(
          [=](std::string& caps) {
            try {
              self->state.caps[d] = json::parse(caps);
              done({});
            } catch (const std::exception& e) {
              done("node " + who(self->state, d) + " sent capabilities that do not parse: "
                   + e.what());
            }
          },
          [=](caf::error& e) {
            done("node " + who(self->state, d) + " did not report capabilities: "
                 + self->system().render(e));
          });
    },
    [=](std::string err) mutable {
      if (ended(self->state))
        return;
      if (!err.empty())
        return failed(err);
      for_each_device(
        self,
        [=](int d, std::function<void(std::string)> done) {
          self
            ->request(self->state.devices[d], timeout, claim_atom::value,
                      self->state.job, int64_t{0})
            .then(
              [=](std::string& e, int64_t) {
                if (e.empty())
                  self->state.claimed.push_back(d);
                // Another node's refusal ended the start already.
                if (e.empty() && self->state.phase != server_phase::starting)
                  release_nodes(self);
                done(e.empty() ? e : "node " + who(self->state, d)
                                       + " cannot serve this job: " + e);
              },
              [=](caf::error& e) {
                done("node " + who(self->state, d) + " cannot serve this job: "
                     + self->system().render(e));
              });
        },
        [=](std::string err) mutable {
          if (ended(self->state))
            return;
          if (!err.empty())
            return failed(err);
          // The nodes are ours: from here on they are watched.
          auto& st = self->state;
          st.heartbeats.emplace(static_cast<int>(st.devices.size()),
                                milliseconds(st.opts.heartbeat_ms), st.opts.heartbeat_misses);
          st.heartbeats->reset(server_clock::now());
          st.ticking = true;
          self->delayed_send(self, tick_period(st), caf::tick_atom::value);
          try {
            self->state.plan = make_plan(self->state);
          } catch (const std::exception& e) {
            return failed(e.what());
          }
          deploy(self);
        });
    });
}

double percentile(std::vector<double> xs, double q) {
  if (xs.empty())
    return 0;
  std::sort(xs.begin(), xs.end());
  auto i = static_cast<size_t>(q * static_cast<double>(xs.size() - 1) + 0.5);
  return xs[std::min(i, xs.size() - 1)];
}

json server_stats(const server_state& st) {
  std::vector<double> lat(st.latencies_ms.begin(), st.latencies_ms.end());
  double seconds = st.first_sent && st.answered > 0
                     ? std::chrono::duration<double>(st.last_answer - *st.first_sent).count()
                     : 0.0;
  json j{{"requests", st.answered},
         {"samples", st.samples},
         {"seconds", seconds},
         {"samples_per_s", seconds > 0 ? static_cast<double>(st.samples) / seconds : 0.0},
         {"latency_p50_ms", percentile(lat, 0.5)},
         {"latency_p99_ms", percentile(lat, 0.99)},
         {"in_flight", st.in_flight.size()},
         {"waiting", st.waiting.size()},
         {"max_in_flight", st.window},
         {"generation", st.generation},
         {"recoveries", st.recoveries}};
  // What the planner priced transfers with.
  j["links"] = st.opts.links ? json(*st.opts.links) : json("every link assumed 1 Gbit/s");
  if (!st.failure.empty())
    j["failure"] = st.failure;
  return j;
}

server_actor::behavior_type server_fun(server_self self, server_options opts,
                                       std::vector<device_actor> devices,
                                       models::sequential_model model) {
  auto& st = self->state;
  st.opts = std::move(opts);
  st.devices = std::move(devices);
  st.model = std::move(model);
  st.model->eval();
  st.sample_shape = st.model->input_shape(0);
  st.input_dtype = st.model->input_dtype();
  detail::drop_unexpected(self, "server");
  self->set_down_handler([=](caf::down_msg& dm) {
    auto& st = self->state;
    if (st.phase == server_phase::idle || ended(st))
      return;
    int lost = -1;
    std::string why;
    for (size_t d = 0; d < st.devices.size() && lost < 0; ++d)
      if (dm.source == st.devices[d].address()) {
        lost = static_cast<int>(d);
        why = "node " + who(st, lost) + " was lost (" + self->system().render(dm.reason)
              + ")";
      }
    for (size_t s = 0; s < st.stages.size() && lost < 0; ++s)
      if (dm.source == st.stages[s].address()) {
        // A stage that went down on its own takes its node out of the
        // pipeline too: what broke it may break the next one.
        lost = st.plan.stages[s].device;
        why = "stage " + std::to_string(s) + " on node " + who(st, lost) + " went down ("
              + self->system().render(dm.reason) + ")";
      }
    if (lost >= 0)
      node_lost(self, lost, why);
  });
  // A server that dies without a stop leaves nothing behind either: its
  // stages quit when it goes down, its nodes are free when it goes.
  return {
    [=](start_atom) -> caf::typed_response_promise<std::string, std::string> {
      auto rp = self->make_response_promise<std::string, std::string>();
      if (self->state.phase != server_phase::idle) {
        rp.deliver(std::string("the server was started already"), std::string{});
        return rp;
      }
      self->state.started = rp;
      start(self);
      return rp;
    },
    [=](infer_atom, std::string& input) -> caf::typed_response_promise<std::string, std::string> {
      auto rp = self->make_response_promise<std::string, std::string>();
      auto& st = self->state;
      if (st.phase != server_phase::serving && st.phase != server_phase::recovering) {
        rp.deliver("the server is not serving"
                     + (st.failure.empty() ? std::string{} : ": " + st.failure),
                   std::string{});
        return rp;
      }
      int64_t rows = 0;
      try {
        auto x = serialization::decode_tensor(input);
        bool ok = x.dim() == static_cast<int64_t>(st.sample_shape.size()) + 1
                  && x.size(0) >= 1 && x.size(0) <= st.opts.micro_batch
                  && x.scalar_type() == st.input_dtype;
        for (size_t i = 0; ok && i < st.sample_shape.size(); ++i)
          ok = x.size(static_cast<int64_t>(i) + 1) == st.sample_shape[i];
        if (!ok)
          throw std::invalid_argument(
            "an input of shape " + c10::str(x.sizes()) + " and dtype "
            + c10::toString(x.scalar_type()) + " (expected 1 to "
            + std::to_string(st.opts.micro_batch) + " rows of "
            + c10::str(c10::IntArrayRef(st.sample_shape)) + ", "
            + c10::toString(st.input_dtype) + ")");
        rows = x.size(0);
      } catch (const std::exception& e) {
        rp.deliver(std::string("request refused: ") + e.what(), std::string{});
        return rp;
      }
      if (static_cast<int64_t>(st.waiting.size()) >= st.opts.max_waiting) {
        rp.deliver("request refused: " + std::to_string(st.waiting.size())
                     + " requests wait already (max_waiting); send it again once "
                       "some are answered",
                   std::string{});
        return rp;
      }
      request_entry r;
      r.id = st.next_id++;
      r.rows = rows;
      r.input = std::move(input);
      r.promise = rp;
      r.arrived = server_clock::now();
      st.waiting.push_back(std::move(r));
      pump(self);
      return rp;
    },
    [=](tensor_atom, serialization::tensor_message& m) {
      auto& st = self->state;
      if (m.generation != st.generation)
        return; // a pipeline a recovery replaced: its requests went again
      if (st.phase != server_phase::serving || m.job != st.job
          || m.kind != serialization::tensor_kind::activation
          || m.sender != st.plan.num_stages() - 1
          || self->current_sender() != caf::actor_cast<caf::strong_actor_ptr>(st.stages.back())) {
        spdlog::error("server: dropped a {} that is not the last stage's output",
                      serialization::to_string(m.kind));
        return;
      }
      auto it = st.in_flight.find(m.step);
      if (it == st.in_flight.end()) {
        spdlog::error("server: dropped an output for request {}, which is not in flight",
                      m.step);
        return;
      }
      auto now = server_clock::now();
      st.latencies_ms.push_back(
        std::chrono::duration<double, std::milli>(now - it->second.arrived).count());
      if (static_cast<int64_t>(st.latencies_ms.size()) > st.opts.latency_window)
        st.latencies_ms.pop_front();
      ++st.answered;
      st.samples += it->second.rows;
      st.last_answer = now;
      st.done.emplace(m.step, std::make_pair(std::move(it->second), std::move(m.payload)));
      st.in_flight.erase(it);
      answer_in_order(self);
      pump(self);
    },
    [=](stats_atom) -> caf::typed_response_promise<std::string> {
      auto rp = self->make_response_promise<std::string>();
      auto& st = self->state;
      auto j = std::make_shared<json>(server_stats(st));
      (*j)["stages"] = json::array();
      const auto S = st.stages.size();
      if (S == 0) {
        rp.deliver(j->dump());
        return rp;
      }
      auto per_stage = std::make_shared<std::vector<json>>(S);
      auto left = std::make_shared<size_t>(S);
      for (size_t s = 0; s < S; ++s) {
        auto on = [=](json stage) mutable {
          (*per_stage)[s] = std::move(stage);
          if (--*left == 0) {
            for (auto& x : *per_stage)
              (*j)["stages"].push_back(std::move(x));
            rp.deliver(j->dump());
          }
        };
        self->request(st.stages[s], milliseconds(self->state.opts.connect_timeout_ms),
                      stats_atom::value)
          .then(
            [=](std::string& text) mutable {
              auto parsed = json::parse(text, nullptr, false);
              on(parsed.is_discarded() ? json{{"error", "stats do not parse"}} : parsed);
            },
            [=](caf::error& e) mutable {
              on(json{{"stage", s}, {"error", self->system().render(e)}});
            });
      }
      return rp;
    },
    [=](caf::tick_atom) {
      auto& st = self->state;
      if (ended(st)) {
        st.ticking = false;
        return;
      }
      self->delayed_send(self, tick_period(st), caf::tick_atom::value);
      auto now = server_clock::now();
      if (st.heartbeats) {
        auto& hb = *st.heartbeats;
        // A round this server skipped (its thread was busy deploying) is
        // its own silence, not the nodes'.
        hb.catch_up(now);
        if (hb.due(now))
          ping_nodes(self, now);
        for (int d : hb.newly_dead(now)) {
          node_lost(self, d, "node " + who(st, d) + " answered no heartbeat for "
                               + std::to_string(hb.tolerance().count()) + " ms");
          if (ended(st))
            return;
        }
      }
      auto limit = milliseconds(st.opts.request_timeout_ms);
      if (st.phase == server_phase::recovering && now - *st.recovering_since > limit)
        return fail(self, "no new pipeline within " + std::to_string(limit.count())
                            + " ms after " + st.recoveries.back().value("why", ""));
      if (st.phase != server_phase::serving)
        return;
      for (auto& [id, r] : st.in_flight)
        if (now - r.sent > limit)
          return fail(self, "request " + std::to_string(id) + ": no answer from the "
                              + "pipeline within " + std::to_string(limit.count()) + " ms");
    },
    [=](stop_atom) {
      fail(self, "the server was stopped", server_phase::stopped);
      self->quit();
    },
  };
}

} // namespace

planner::model_profile profile_for_serving(const std::string& model,
                                           const nlohmann::json& model_options,
                                           int64_t micro_batch) {
  training::profiler_options popts;
  popts.batch_sizes = {micro_batch};
  popts.warmup = 3;
  popts.repeats = 9;
  // A fresh copy: profiling runs forward passes, which would move
  // BatchNorm statistics of the weights the stages get.
  auto probe = training::build_model(model, model_options);
  // On one thread, as nodes compute by default (`asteroid node --threads
  // 1`); the caller's thread count is restored after.
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  try {
    // The process's first passes are slow (thread pool, allocator).
    std::vector<int64_t> shape{micro_batch};
    for (auto d : probe->input_shape())
      shape.push_back(d);
    {
      torch::NoGradGuard no_grad;
      auto x = probe->input_dtype() == torch::kInt64 ? torch::zeros(shape, torch::kInt64)
                                                     : torch::randn(shape);
      for (int i = 0; i < 3; ++i)
        probe->forward(x);
    }
    auto profile = training::profile_model(probe, model, popts);
    at::set_num_threads(threads);
    return profile;
  } catch (...) {
    at::set_num_threads(threads);
    throw;
  }
}

server_actor spawn_server(caf::actor_system& sys, server_options options,
                          std::vector<device_actor> devices,
                          models::sequential_model model) {
  if (devices.empty())
    throw std::invalid_argument("server: no nodes to serve on");
  if (options.micro_batch < 1)
    throw std::invalid_argument("server: micro_batch must be >= 1");
  if (options.max_in_flight < 0)
    throw std::invalid_argument("server: max_in_flight must be >= 0");
  if (options.request_timeout_ms < 1 || options.connect_timeout_ms < 1)
    throw std::invalid_argument("server: timeouts must be >= 1 ms");
  if (options.heartbeat_ms < 1 || options.heartbeat_misses < 1)
    throw std::invalid_argument("server: heartbeat_ms and heartbeat_misses must be >= 1");
  if (options.max_waiting < 1)
    throw std::invalid_argument("server: max_waiting must be >= 1");
  if (!model)
    throw std::invalid_argument("server: no model");
  kernels::parse_wire_codec(options.activation_codec);
  if (options.links && options.links->size() != static_cast<int>(devices.size()))
    throw std::invalid_argument("server: links measured for "
                                + std::to_string(options.links->size()) + " nodes, but "
                                + std::to_string(devices.size()) + " devices given");
  // Detached: planning profiles the model and deploying encodes weights,
  // which would hold a scheduler thread for seconds.
  return sys.spawn<caf::detached>(server_fun, std::move(options), std::move(devices),
                                  std::move(model));
}

} // namespace asteroid::actors
