// The inference server's pipeline (server.hpp): claim the nodes, plan,
// build each stage on its node, wire the stages; after a loss, plan on the
// nodes left and build again.
#include "server_state.hpp"

#include "asteroid/actors/inference_spec.hpp"
#include "asteroid/actors/node_capabilities.hpp"
#include "asteroid/actors/stage_state.hpp"
#include "asteroid/kernels/wire_codec.hpp"
#include "asteroid/planner/inference_planner.hpp"
#include "asteroid/planner/json_io.hpp"
#include "asteroid/serialization/tensor_wire.hpp"
#include "job_claim.hpp"
#include "upload_in_pieces.hpp"

#include <spdlog/spdlog.h>

#include <functional>
#include <memory>

namespace asteroid::actors::serving {

namespace {

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

/// The bandwidth of the link from device `from` to device `to`: as measured,
/// else 1 Gbit/s.
double link_Bps(const server_state& st, int from, int to) {
  return st.opts.links ? st.opts.links->bandwidth(from, to) : 1e9 / 8;
}

/// The codec of the link from device `from` to device `to`: the server's
/// activation codec, unless the link is at least as fast as
/// `compress_below_mbps`.
std::string link_codec(const server_state& st, int from, int to) {
  const auto below = st.opts.compress_below_mbps;
  if (below > 0 && link_Bps(st, from, to) * 8 / 1e6 >= below)
    return "none";
  return st.opts.activation_codec;
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
                     plannable_memory_bytes(st.caps[d]),
                     d < st.opts.nodes.size() ? st.opts.nodes[d] : ""});
  }
  auto c = planner::cluster::uniform("serve", specs, 1e9);
  // Each link priced with the bytes its own codec puts on the wire: a link
  // that carries r bytes per byte computed moves them as fast as an
  // uncompressed link 1/r times as fast would.
  for (size_t i = 0; i < alive.size(); ++i)
    for (size_t j = 0; j < alive.size(); ++j) {
      if (i == j)
        continue;
      const double ratio
        = kernels::wire_ratio(kernels::parse_wire_codec(link_codec(st, alive[i], alive[j])));
      c.bandwidth_Bps[i][j] = link_Bps(st, alive[i], alive[j]) / ratio;
      if (st.opts.links)
        c.latency_s[i][j] = st.opts.links->latency(alive[i], alive[j]);
    }
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
          spdlog::warn("server: new pipeline in {:.3f} s on {} stages; sending {} requests "
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
    if (s + 1 < S)
      spec.activation_codec = link_codec(st, stage.device, st.plan.stages[s + 1].device);
    if (s > 0)
      spec.input_codec = link_codec(st, st.plan.stages[s - 1].device, stage.device);
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
    auto device = st.devices[stage.device];
    const auto timeout = milliseconds(st.opts.request_timeout_ms);
    auto build = [=](json spec_json, std::string state) mutable {
      self->request(device, timeout, serve_atom::value, spec_json.dump(), std::move(state))
        .then([=](std::string& err, caf::actor& a) mutable { on(err, a); },
              [=](caf::error& err) mutable { on(self->system().render(err), caf::actor{}); });
    };
    if (static_cast<int64_t>(weights.size()) <= state_piece_bytes) {
      build(to_json(spec), std::move(weights));
      continue;
    }
    // Large weights go in pieces first (state_uploads.hpp: as one message
    // they would hold the server's heartbeats to that node back).
    const auto id = ++st.uploads;
    detail::upload_in_pieces(
      self, device, std::make_shared<const std::string>(std::move(weights)), id, timeout,
      [=] { return self->state.generation == generation && !ended(self->state); },
      [=](const std::string& err) mutable {
        if (!err.empty())
          return on(err, caf::actor{});
        auto j = to_json(spec);
        j["state_upload"] = id;
        build(std::move(j), std::string{});
      });
  }
}

/// Plans the model again on the nodes not lost, builds the new stages and
/// (wire) sends every request in flight through them; `record`, with `why`,
/// goes to the stats' recoveries.
void replan(server_self self, json record, const std::string& why) {
  auto& st = self->state;
  ++st.generation;
  if (!st.recovering_since)
    st.recovering_since = server_clock::now();
  st.phase = server_phase::recovering; // bounded by the tick
  record["why"] = why;
  record["generation"] = st.generation;
  record["in_flight"] = st.in_flight.size();
  st.recoveries.push_back(std::move(record));
  stop_stages(self);
  try {
    st.plan = make_plan(st);
  } catch (const std::exception& e) {
    return fail(self, why + "; no pipeline on the nodes left: " + e.what());
  }
  deploy(self);
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
  spdlog::warn("server: {}; re-planning on the {} nodes left", why,
               st.devices.size() - st.dead.size());
  replan(self, {{"lost", who(st, d)}}, why);
}

} // namespace

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

void hold_unreachable(server_self self, const caf::strong_actor_ptr& from,
                      const std::string& endpoint, const std::string& why) {
  auto& st = self->state;
  int reporter = -1, peer = -1;
  for (size_t d = 0; d < st.devices.size(); ++d) {
    if (from && from == caf::actor_cast<caf::strong_actor_ptr>(st.devices[d]))
      reporter = static_cast<int>(d);
    if (!endpoint.empty() && data_endpoint_of(st, static_cast<int>(d)) == endpoint)
      peer = static_cast<int>(d);
  }
  st.unreachable.hold(reporter, peer, why, st.dead);
}

void judge_unreachable(server_self self, server_clock::time_point now) {
  auto& st = self->state;
  if (!st.heartbeats || ended(st))
    return;
  const auto lately = milliseconds(2 * st.opts.heartbeat_ms);
  auto l = st.unreachable.judge(
    st.dead, [&](int d) { return now - st.heartbeats->last_answer(d) <= lately; },
    [&](int d) { return who(st, d); });
  if (!l)
    return;
  const bool probed = st.opts.recover && l->other >= 0;
  node_lost(self, l->device,
            l->reason
              + (probed ? " (taken back once a probe from " + who(st, l->other)
                            + " gets through)"
                        : std::string(" (not taken back)")));
  if (probed && !ended(st) && st.dead.count(l->device))
    st.cut.add(l->device, l->other, now);
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

namespace {

/// What runs after every device answered one step of the start: `next`,
/// unless a device's error (or a stop meanwhile) ended the start.
std::function<void(std::string)> unless_failed(server_self self, std::function<void()> next) {
  return [=](std::string err) {
    if (ended(self->state))
      return;
    if (!err.empty())
      return fail(self, err);
    next();
  };
}

/// The nodes are ours: watch them, plan, build.
void plan_and_deploy(server_self self) {
  auto& st = self->state;
  st.heartbeats.emplace(static_cast<int>(st.devices.size()),
                        milliseconds(st.opts.heartbeat_ms), st.opts.heartbeat_misses);
  st.heartbeats->reset(server_clock::now());
  start_clock(self);
  try {
    st.plan = make_plan(st);
  } catch (const std::exception& e) {
    return fail(self, e.what());
  }
  deploy(self);
}

void claim_nodes(server_self self) {
  const auto timeout = milliseconds(self->state.opts.connect_timeout_ms);
  for_each_device(
    self,
    [=](int d, std::function<void(std::string)> done) {
      self
        ->request(self->state.devices[d], timeout, claim_atom::value, self->state.job,
                  int64_t{0},
                  path_window_ms(self->state.opts.heartbeat_ms,
                                 self->state.opts.heartbeat_misses))
        .then(
          [=](std::string& e, int64_t) {
            if (e.empty())
              self->state.claimed.push_back(d);
            // Another node's refusal ended the start already.
            if (e.empty() && self->state.phase != server_phase::starting)
              release_nodes(self);
            done(e.empty() ? e
                           : "node " + who(self->state, d) + " cannot serve this job: " + e);
          },
          [=](caf::error& e) {
            done("node " + who(self->state, d) + " cannot serve this job: "
                 + self->system().render(e));
          });
    },
    unless_failed(self, [=] { plan_and_deploy(self); }));
}

void read_capabilities(server_self self) {
  const auto timeout = milliseconds(self->state.opts.connect_timeout_ms);
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
    unless_failed(self, [=] { claim_nodes(self); }));
}

} // namespace

void node_returned(server_self self, int d) {
  auto& st = self->state;
  if (st.phase != server_phase::serving || !st.silent.count(d))
    return;
  st.silent.erase(d);
  take_back(self, d, "node " + who(st, d) + " answers its heartbeats again");
}

void take_back(server_self self, int d, const std::string& why) {
  auto& st = self->state;
  if (st.phase != server_phase::serving || !st.dead.count(d))
    return;
  st.dead.erase(d);
  st.heartbeats->revive(d, server_clock::now());
  spdlog::warn("server: {}; planning again over {} nodes", why,
               st.devices.size() - st.dead.size());
  replan(self, {{"rejoined", who(st, d)}}, why);
}

void start(server_self self) {
  auto& st = self->state;
  st.phase = server_phase::starting;
  st.job = detail::draw_job_id();
  st.caps.assign(st.devices.size(), json::object());
  for (auto& d : st.devices)
    self->monitor(d);
  read_capabilities(self);
}

} // namespace asteroid::actors::serving
