// The inference server's actor (server.hpp): requests in, outputs out in
// request order, heartbeats and timeouts on its own clock; the pipeline
// behind it is server_pipeline.cpp's.
#include "server_state.hpp"

#include "asteroid/kernels/wire_codec.hpp"
#include "asteroid/planner/json_io.hpp"
#include "asteroid/serialization/tensor_wire.hpp"
#include "asteroid/training/model_registry.hpp"
#include "asteroid/training/profiler.hpp"
#include "unexpected.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <memory>

namespace asteroid::actors {

namespace serving {

std::string who(const server_state& st, int d) {
  if (d >= 0 && static_cast<size_t>(d) < st.caps.size() && st.caps[d].contains("name"))
    return st.caps[d]["name"].get<std::string>();
  if (d >= 0 && static_cast<size_t>(d) < st.opts.nodes.size())
    return st.opts.nodes[d];
  return "device " + std::to_string(d);
}

bool ended(const server_state& st) {
  return st.phase == server_phase::failed || st.phase == server_phase::stopped;
}

/// Ends serving: every request not answered gets `why`.
void fail(server_self self, const std::string& why, server_phase to) {
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

namespace {

void answer_in_order(server_self self) {
  auto& st = self->state;
  for (auto it = st.done.find(st.next_answer); it != st.done.end();
       it = st.done.find(st.next_answer)) {
    it->second.first.promise.deliver(std::string{}, std::move(it->second.second));
    st.done.erase(it);
    ++st.next_answer;
  }
}

/// Sends a tick to `target` every `period` while it lives. It holds the
/// target by address (weakly), so that it never keeps a server from being
/// destroyed.
caf::behavior metronome(caf::event_based_actor* self, caf::actor_addr target,
                        milliseconds period) {
  self->delayed_send(self, period, caf::tick_atom::value);
  return {
    [=](caf::tick_atom) {
      auto to = caf::actor_cast<caf::actor>(target);
      if (!to)
        return self->quit();
      caf::anon_send(to, caf::tick_atom::value);
      self->delayed_send(self, period, caf::tick_atom::value);
    },
  };
}

void stop_clock(server_self self) {
  auto& st = self->state;
  if (st.metronome)
    self->send_exit(st.metronome, caf::exit_reason::user_shutdown);
  st.metronome = nullptr;
}

} // namespace

void start_clock(server_self self) {
  auto& st = self->state;
  if (st.metronome)
    return;
  // Each heartbeat, and at least twice a second for the timeouts.
  const auto period = std::min(milliseconds(500), milliseconds(st.opts.heartbeat_ms));
  st.metronome = self->home_system().spawn(metronome, self->address(), period);
}

namespace {

/// Pings are answered as messages (server_actor's heartbeat entry), not as
/// requests: a request's timeout is a timer that refers to the server.
constexpr int64_t max_ping_devices = 4096;

/// Pings every node the server holds and not yet lost; an answer restarts
/// the node's clock, silence is what heartbeat_monitor::newly_dead counts.
void ping_nodes(server_self self, server_clock::time_point now) {
  auto& st = self->state;
  auto& hb = *st.heartbeats;
  const auto round = hb.pinged(now);
  for (int d : st.claimed) {
    if (hb.dead(d) && !st.silent.count(d))
      continue; // its connection closed: it cannot answer
    self->send(st.devices[d], heartbeat_atom::value, round * max_ping_devices + d);
  }
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
  // From the first answer on, the pipeline is full (with enough requests
  // in flight): its rate is what the planner predicts, without the time
  // the first request took to cross every stage.
  double steady_seconds = st.first_answer && st.answered > 1
                            ? std::chrono::duration<double>(st.last_answer - *st.first_answer)
                                .count()
                            : 0.0;
  json j{{"requests", st.answered},
         {"samples", st.samples},
         {"seconds", seconds},
         {"samples_per_s", seconds > 0 ? static_cast<double>(st.samples) / seconds : 0.0},
         {"steady_seconds", steady_seconds},
         {"steady_samples_per_s",
          steady_seconds > 0
            ? static_cast<double>(st.samples - st.first_answer_samples) / steady_seconds
            : 0.0},
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
        st.silent.erase(lost); // gone for good, not only silent
        st.cut.forget(lost);
        st.healed.erase(lost);
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
      if (!st.first_answer) {
        st.first_answer = now;
        st.first_answer_samples = it->second.rows;
      }
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
    [=](heartbeat_atom, int64_t seq) {
      auto& st = self->state;
      if (!st.heartbeats || ended(st) || seq < 0)
        return;
      const auto d = static_cast<size_t>(seq % max_ping_devices);
      if (d >= st.devices.size()
          || self->current_sender() != caf::actor_cast<caf::strong_actor_ptr>(st.devices[d]))
        return; // not that node's own answer
      if (st.silent.count(static_cast<int>(d)))
        return node_returned(self, static_cast<int>(d));
      st.heartbeats->answered(static_cast<int>(d), seq / max_ping_devices,
                              server_clock::now());
    },
    [=](unreachable_atom, std::string& endpoint, std::string& why) {
      hold_unreachable(self, self->current_sender(), endpoint, why);
      judge_unreachable(self, server_clock::now());
    },
    [=](probe_atom, int64_t d, bool answered) {
      if (d < 0 || d >= static_cast<int64_t>(self->state.devices.size()))
        return;
      path_probed(self, caf::actor_cast<caf::actor_addr>(self->current_sender()),
                  static_cast<int>(d), answered);
    },
    [=](caf::tick_atom) {
      auto& st = self->state;
      if (ended(st))
        return stop_clock(self);
      auto now = server_clock::now();
      if (st.heartbeats) {
        auto& hb = *st.heartbeats;
        // A round this server skipped (its thread was busy deploying) is
        // its own silence, not the nodes'.
        hb.catch_up(now);
        if (hb.due(now))
          ping_nodes(self, now);
        for (int d : hb.newly_dead(now)) {
          if (!st.dead.count(d))
            st.silent.insert(d);
          node_lost(self, d, "node " + who(st, d) + " answered no heartbeat for "
                               + std::to_string(hb.tolerance().count()) + " ms");
          if (ended(st))
            return;
        }
        judge_unreachable(self, now);
        if (ended(st))
          return;
        probe_cut_paths(self, now);
        if (ended(st))
          return;
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
      stop_clock(self);
      fail(self, "the server was stopped", server_phase::stopped);
      self->quit();
    },
  };
}

} // namespace

} // namespace serving

planner::model_profile profile_for_serving(const std::string& model,
                                           const nlohmann::json& model_options,
                                           int64_t micro_batch) {
  training::profiler_options popts;
  popts.batch_sizes = {micro_batch};
  popts.warmup = 3;
  popts.repeats = 9;
  // As a stage computes: forward only, eval mode, no autograd.
  popts.forward_only = true;
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
  if (!(options.compress_below_mbps >= 0) || !std::isfinite(options.compress_below_mbps))
    throw std::invalid_argument("server: compress_below_mbps must be a number >= 0");
  if (devices.size() >= static_cast<size_t>(serving::max_ping_devices))
    throw std::invalid_argument("server: at most "
                                + std::to_string(serving::max_ping_devices - 1) + " nodes");
  if (options.links && options.links->size() != static_cast<int>(devices.size()))
    throw std::invalid_argument("server: links measured for "
                                + std::to_string(options.links->size()) + " nodes, but "
                                + std::to_string(devices.size()) + " devices given");
  // Detached: planning profiles the model and deploying encodes weights,
  // which would hold a scheduler thread for seconds.
  return sys.spawn<caf::detached>(serving::server_fun, std::move(options), std::move(devices),
                                  std::move(model));
}

} // namespace asteroid::actors
