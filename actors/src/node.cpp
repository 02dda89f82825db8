#include "asteroid/actors/node.hpp"

#include "asteroid/actors/data_plane.hpp"
#include "asteroid/actors/replica.hpp"
#include "asteroid/actors/snapshot_store.hpp"
#include "asteroid/kernels/allocator.hpp"
#include "asteroid/planner/json_io.hpp"
#include "asteroid/training/model_registry.hpp"
#include "asteroid/training/profiler.hpp"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <limits>
#include <map>
#include <unistd.h>
#include <cstdio>
#include <stdexcept>
#include <thread>
#include <vector>

namespace asteroid::actors {

void configure(caf::actor_system_config& cfg, const net_options& net) {
  cfg.load<caf::io::middleman>();
  cfg.set("middleman.heartbeat-interval", caf::timespan{net.heartbeat});
  cfg.set("middleman.connection-timeout",
          caf::timespan{net.connection_timeout});
  // An idle CAF worker polls its queue every 50 us for 500 rounds before it
  // sleeps on a condition variable. A node gets a message every few ms, so
  // its workers rarely got that far and woke about 20 000 times a second,
  // preempting the compute thread on their core (a median of 69-337
  // involuntary context switches per stage backward pass in throughput_bench
  // traces; 22-66 without this phase). An idle worker now sleeps until a
  // message is enqueued for it, which wakes it through its condition
  // variable.
  cfg.set("work-stealing.moderate-poll-attempts", size_t{0});
}

std::pair<std::string, uint16_t> parse_endpoint(const std::string& text) {
  auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size())
    throw std::invalid_argument("endpoint '" + text
                                + "': expected HOST:PORT");
  auto port_text = text.substr(colon + 1);
  long port = -1;
  try {
    size_t used = 0;
    port = std::stol(port_text, &used);
    if (used != port_text.size())
      port = -1;
  } catch (const std::exception&) {
  }
  if (port <= 0 || port > 65535)
    throw std::invalid_argument("endpoint '" + text + "': bad port '"
                                + port_text + "'");
  return {text.substr(0, colon), static_cast<uint16_t>(port)};
}

caf::actor connect(caf::actor_system& sys, const std::string& host,
                   uint16_t port, std::chrono::milliseconds timeout) {
  // CAF 0.17.6 opens the client side of a BASP connection with `last_seen`
  // at the clock's epoch and sets it only when the server's handshake
  // arrives, so a heartbeat tick in between drops a healthy connection with
  // connection_timeout. A handshake spans a tick whenever it is slow (a
  // loaded host, a long link), so that drop is retried while time is left.
  using clock = std::chrono::steady_clock;
  auto deadline = clock::now() + timeout;
  caf::scoped_actor self{sys};
  caf::actor result;
  std::string error;
  int dropped = 0;
  for (int attempt = 1; !result; ++attempt) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - clock::now());
    bool dropped_in_handshake = false;
    self
      ->request(sys.middleman().actor_handle(),
                std::max(left, std::chrono::milliseconds(1)),
                caf::connect_atom::value, host, port)
      .receive(
        [&](const caf::node_id&, caf::strong_actor_ptr& p,
            const std::set<std::string>&) {
          if (p)
            result = caf::actor_cast<caf::actor>(std::move(p));
          else
            error = "no actor published there";
        },
        [&](caf::error& e) {
          dropped_in_handshake = e == caf::sec::connection_timeout;
          error = e == caf::sec::request_timeout
                    ? "no answer within " + std::to_string(timeout.count())
                        + " ms"
                    : sys.render(e);
        });
    dropped += dropped_in_handshake;
    if (result || !dropped_in_handshake || clock::now() >= deadline)
      break;
    spdlog::warn("connecting to {}:{}: handshake dropped by CAF's heartbeat "
                 "tick (attempt {}), retrying",
                 host, port, attempt);
  }
  if (!result) {
    if (dropped > 0)
      error += " (" + std::to_string(dropped)
               + " handshakes dropped at CAF's heartbeat tick: each took "
                 "longer than one tick)";
    throw std::runtime_error("cannot connect to node " + host + ":"
                             + std::to_string(port) + ": " + error);
  }
  return result;
}

std::vector<caf::actor> connect_all(caf::actor_system& sys,
                                    const std::vector<std::string>& endpoints,
                                    std::chrono::milliseconds timeout) {
  std::vector<caf::actor> out;
  for (auto& e : endpoints) {
    auto [host, port] = parse_endpoint(e);
    out.push_back(connect(sys, host, port, timeout));
  }
  return out;
}

namespace {

struct device_state {
  device_options opts;
  std::shared_ptr<data_plane> dp;
  std::vector<caf::actor> replicas;
  /// Builds the replicas deployed here (replica_builder), so that this
  /// actor keeps answering heartbeats meanwhile.
  caf::actor builder;
  /// Deployments the builder works on, by number: answered when it is done.
  std::map<int64_t, caf::response_promise> deploying;
  int64_t deploys = 0;
  snapshot_store store;
};

/// Logs a failed deployment on device `name` and says why, for the supervisor.
std::string deploy_failure(const std::string& name, const std::string& why) {
  spdlog::error("{}: deploy failed: {}", name, why);
  return "deploy on " + name + ": " + why;
}

/// Builds replicas for a device, one deployment after another, on a thread
/// that lives as long as the device: building a replica (the model, its
/// state) can take seconds on a small device, and a device actor that did
/// it itself would not answer heartbeats, so a supervisor that watches them
/// during a deployment would take a busy node for a hung one. One long-lived
/// thread, not one per deployment: a fresh thread made a recovery's
/// deployment 30-100 ms slower (fault_bench, replay). The device answers the
/// supervisor (its replies must come from the device it asked).
caf::behavior replica_builder(caf::event_based_actor* self, caf::actor home,
                              std::shared_ptr<data_plane> dp, std::string name) {
  return {
    [=](deploy_atom, int64_t id, const std::string& spec_json,
        const std::string& state)
      -> std::tuple<adopt_atom, int64_t, std::string, caf::actor> {
      try {
        auto spec = replica_spec_from_json(nlohmann::json::parse(spec_json));
        auto r = spawn_replica(self->system(), spec, state, home, dp);
        spdlog::info("{}: deployed {} (layers [{}, {}), share {})", name,
                     spec.label, spec.first_layer, spec.end_layer,
                     spec.shares[spec.replica]);
        return {adopt_atom::value, id, std::string{}, r};
      } catch (const std::exception& e) {
        return {adopt_atom::value, id, deploy_failure(name, e.what()), caf::actor{}};
      }
    },
  };
}

/// Fastest of `repeats` round trips `echo(bytes)` for a 1-byte payload and
/// for a `bytes`-sized one (negative: an echo was lost). The two sizes take
/// turns so that a busy spell of the host slows both alike, and the fastest
/// trip is kept because queueing behind other work only ever adds time. Each
/// trip sends a fresh copy made just before the clock starts: the probe times
/// the transport (as the raw-TCP comparison, which resends one buffer, does),
/// with the bytes as warm in cache as a tensor encoded just before its send.
/// The first pair warms the path up and is not timed.
struct round_trips {
  double tiny_s = -1;
  double big_s = -1;
};

template <class Echo>
round_trips fastest_round_trips(int64_t bytes, int repeats, Echo&& echo) {
  const std::string tiny(1, 'x'), big(static_cast<size_t>(bytes), 'x');
  // Seconds of one round trip, negative when the echo was lost.
  auto time_one = [&](const std::string& payload) {
    std::string copy = payload;
    auto t0 = std::chrono::steady_clock::now();
    if (!echo(std::move(copy)))
      return -1.0;
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
      .count();
  };
  if (time_one(tiny) < 0 || time_one(big) < 0)
    return {};
  round_trips best{std::numeric_limits<double>::max(),
                   std::numeric_limits<double>::max()};
  for (int i = 0; i < repeats; ++i) {
    auto t = time_one(tiny), b = time_one(big);
    if (t < 0 || b < 0)
      return {};
    best.tiny_s = std::min(best.tiny_s, t);
    best.big_s = std::min(best.big_s, b);
  }
  return best;
}

/// Seconds until `count` payloads of `bytes`, sent back to back through
/// `send`, have all been echoed (`await_echo`), as a stage streams its
/// micro-batches; negative when an echo was lost. The copies are made
/// before the clock starts, as tensors encoded before their sends. One
/// untimed stream warms the connection up first: TCP grows its window with
/// use, and a fresh loopback connection's first stream is several times
/// slower than the next ones.
template <class Send, class Await>
double stream_seconds(int64_t bytes, int count, Send&& send, Await&& await_echo) {
  auto one_stream = [&]() -> double {
    std::vector<std::string> payloads(static_cast<size_t>(count),
                                      std::string(static_cast<size_t>(bytes), 'x'));
    auto t0 = std::chrono::steady_clock::now();
    for (auto& p : payloads)
      if (!send(std::move(p)))
        return -1;
    for (int i = 0; i < count; ++i)
      if (!await_echo())
        return -1;
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
      .count();
  };
  return one_stream() < 0 ? -1 : one_stream();
}

/// How often the bandwidth payload may grow fourfold when it does not take
/// measurably longer than a tiny one (1 MiB grows to at most 64 MiB).
constexpr int max_probe_growths = 3;

caf::behavior device_fun(caf::stateful_actor<device_state>* self,
                         device_options opts, std::shared_ptr<data_plane> dp) {
  self->state.opts = opts;
  self->state.dp = dp;
  // Linked: it goes when the device goes (user_shutdown, kill).
  self->state.builder = self->spawn<caf::detached + caf::linked>(
    replica_builder, caf::actor_cast<caf::actor>(self), dp, opts.name);
  if (dp)
    dp->add_sink(caf::actor_cast<caf::actor>(self)); // snapshots from peers
  self->set_default_handler(
    [](caf::scheduled_actor*, caf::message_view& x) -> caf::result<caf::message> {
      spdlog::error("device: ignored unexpected message {}",
                    caf::to_string(x.content()));
      return caf::sec::unexpected_message;
    });
  return {
    [=](caps_atom) -> std::string {
      const auto& o = self->state.opts;
      return nlohmann::json{{"name", o.name},
                            {"memory_bytes", o.memory_bytes},
                            {"threads", o.threads},
                            {"slowdown", o.slowdown},
                            {"slowdown_emulated", o.slowdown != 1.0},
                            {"endpoint", o.endpoint},
                            {"link_interface", o.link_interface},
                            {"pid", static_cast<int64_t>(::getpid())},
                            {"data_port", self->state.dp ? self->state.dp->port() : 0},
                            {"replicas", self->state.replicas.size()}}
        .dump();
    },
    [=](caf::ping_atom) { return caf::pong_atom::value; },
    [=](heartbeat_atom, int64_t seq) {
      return caf::make_message(heartbeat_atom::value, seq);
    },
    [=](snap_atom, const std::string& key, int64_t version,
        std::string& state) {
      std::string err = self->state.store.put(key, version, std::move(state));
      if (!err.empty())
        spdlog::error("{}: dropped snapshot: {}", self->state.opts.name, err);
    },
    [=](inventory_atom, int32_t tag) {
      return caf::make_message(inventory_atom::value, tag,
                               self->state.store.inventory().dump());
    },
    [=](forget_atom) {
      auto bytes = static_cast<int64_t>(self->state.store.bytes());
      self->state.store.clear();
      return bytes;
    },
    [=](fetch_atom, const std::string& key, int64_t version)
      -> std::tuple<std::string, std::string> {
      auto bytes = self->state.store.get(key, version);
      if (!bytes)
        return {self->state.opts.name + " holds no snapshot " + key
                  + " of version " + std::to_string(version),
                std::string{}};
      return {std::string{}, *bytes};
    },
    [=](profile_atom, const std::string& request) -> caf::response_promise {
      // Profiling takes seconds: a worker thread does it, so this device
      // keeps answering heartbeats.
      auto rp = self->make_response_promise();
      auto opts = self->state.opts;
      self->system().spawn<caf::detached>(
        [rp, opts, request](caf::event_based_actor*) mutable {
          try {
            auto j = nlohmann::json::parse(request);
            training::profiler_options po;
            j.at("batch_sizes").get_to(po.batch_sizes);
            j.at("warmup").get_to(po.warmup);
            j.at("repeats").get_to(po.repeats);
            po.optimizer = training::parse_optimizer(j.at("optimizer").get<std::string>());
            po.slowdown = opts.slowdown;
            po.device = opts.name;
            auto name = j.at("model").get<std::string>();
            auto model = training::build_model(name, j.at("model_options"));
            auto profile = training::profile_model(model, name, po);
            rp.deliver(std::string{}, nlohmann::json(profile).dump());
          } catch (const std::exception& e) {
            rp.deliver(opts.name + ": " + e.what(), std::string{});
          }
        });
      return rp;
    },
    [=](echo_atom, const std::string& payload) {
      return static_cast<int64_t>(payload.size());
    },
    [=](probe_atom, const std::string& endpoint, int64_t bytes,
        int32_t repeats, int32_t path, int32_t stream) -> caf::response_promise {
      auto rp = self->make_response_promise();
      auto name = self->state.opts.name;
      auto my_endpoint = self->state.opts.endpoint;
      auto dp = self->state.dp;
      self->system().spawn(
        [rp, name, endpoint, bytes, repeats, path, stream, dp,
         my_endpoint](caf::blocking_actor* w) mutable {
          auto fail = [&](const std::string& why) {
            rp.deliver(name + " -> " + endpoint + ": " + why, int64_t{0},
                       int64_t{0});
          };
          if (bytes < 1 || bytes > (int64_t{1} << 30) || repeats < 1
              || repeats > 100)
            return fail("probe size or repeat count out of range");
          if (stream < 0 || stream > 1024 || stream * bytes > (int64_t{1} << 30))
            return fail("probe stream of " + std::to_string(stream)
                        + " payloads out of range (0 to 1024, 1 GiB in all)");
          if (path != probe_caf && path != probe_data_plane && path != probe_auto)
            return fail("unknown probe path " + std::to_string(path));
          caf::actor peer;
          try {
            auto [host, port] = parse_endpoint(endpoint);
            peer = connect(w->system(), host, port, std::chrono::seconds(5));
          } catch (const std::exception& e) {
            return fail(e.what());
          }
          std::string peer_dp, my_dp;
          int64_t port = 0;
          if (path != probe_caf) {
            w->request(peer, std::chrono::seconds(5), caps_atom::value)
              .receive(
                [&](const std::string& text) {
                  auto j = nlohmann::json::parse(text, nullptr, false);
                  if (j.is_object())
                    port = j.value("data_port", int64_t{0});
                },
                [&](caf::error&) {});
            bool mine = dp && !my_endpoint.empty();
            bool theirs = !data_endpoint(endpoint, port).empty();
            if (path == probe_auto)
              path = mine && theirs ? probe_data_plane : probe_caf;
            else if (!mine)
              return fail("this node has no data plane");
            else if (!theirs)
              return fail("the peer has no data plane");
          }
          if (path == probe_data_plane) {
            peer_dp = data_endpoint(endpoint, port);
            my_dp = data_endpoint(my_endpoint, dp->port());
            dp->add_sink(caf::actor_cast<caf::actor>(w));
          }
          // Out through our data plane, answered through the peer's; or as a
          // CAF request, answered by the peer's device actor.
          using caf_echo = decltype(w->request(peer, std::chrono::seconds(30),
                                               echo_atom::value, std::string{}));
          std::vector<caf_echo> in_flight;
          size_t answered = 0;
          auto send = [&](std::string payload) {
            if (path == probe_data_plane) {
              serialization::frame_header h;
              h.kind = serialization::frame_kind::echo;
              h.step = static_cast<int64_t>(w->id());
              return dp->send(peer_dp, h, my_dp, std::move(payload));
            }
            in_flight.push_back(w->request(peer, std::chrono::seconds(30),
                                           echo_atom::value, std::move(payload)));
            return true;
          };
          auto await_echo = [&] {
            bool ok = false;
            if (path == probe_data_plane)
              w->receive([&](echo_atom, int64_t) { ok = true; },
                         caf::after(std::chrono::seconds(30)) >> [] {});
            else if (answered < in_flight.size())
              in_flight[answered++].receive([&](int64_t) { ok = true; },
                                            [&](caf::error&) {});
            return ok;
          };
          auto echo = [&](std::string payload) {
            return send(std::move(payload)) && await_echo();
          };
          if (stream > 0) {
            auto t = stream_seconds(bytes, stream, send, await_echo);
            auto tiny = fastest_round_trips(1, 1, echo).tiny_s;
            if (dp)
              dp->remove_sink(w->id());
            if (t <= 0 || tiny < 0)
              return fail("no echo within 30 s");
            return rp.deliver(std::string{},
                              static_cast<int64_t>(tiny / 2 * 1e9),
                              static_cast<int64_t>(static_cast<double>(bytes)
                                                   * stream / t));
          }
          // On a fast path (loopback through the data plane moves 1 MiB in
          // about 0.3 ms) the payload may add less than scheduling noise to
          // the round trip, and the noise would then decide the bandwidth.
          // The payload grows until it adds at least a quarter of the tiny
          // round trip; if it never does, that quarter bounds the transfer
          // time and the bandwidth is a lower bound.
          int64_t probe_bytes = bytes;
          round_trips rt;
          for (int growth = 0;; ++growth) {
            rt = fastest_round_trips(probe_bytes, repeats, echo);
            if (rt.tiny_s < 0 || rt.big_s < 0)
              break;
            if (rt.big_s - rt.tiny_s >= rt.tiny_s / 4
                || growth == max_probe_growths
                || probe_bytes > (int64_t{1} << 30) / 4)
              break;
            probe_bytes *= 4;
          }
          if (dp)
            dp->remove_sink(w->id());
          if (rt.tiny_s < 0 || rt.big_s < 0)
            return fail("no echo within 30 s");
          auto transfer = std::max(rt.big_s - rt.tiny_s, rt.tiny_s / 4);
          rp.deliver(std::string{}, static_cast<int64_t>(rt.tiny_s / 2 * 1e9),
                     static_cast<int64_t>(static_cast<double>(probe_bytes)
                                          / transfer));
        });
      return rp;
    },
    [=](slow_atom, int32_t permille) {
      if (permille < 1000) {
        spdlog::error("{}: ignored slowdown {} permille (must be >= 1000)",
                      self->state.opts.name, permille);
        return;
      }
      self->state.opts.slowdown = permille / 1000.0;
      spdlog::info("{}: emulated slowdown now {:.2f}", self->state.opts.name,
                   self->state.opts.slowdown);
      for (auto& r : self->state.replicas)
        self->send(r, slow_atom::value, permille);
    },
    [=](deploy_atom, const std::string& spec_json, std::string& state)
      -> caf::response_promise {
      auto rp = self->make_response_promise();
      try {
        auto j = nlohmann::json::parse(spec_json);
        auto spec = replica_spec_from_json(j);
        spec.slowdown = std::max(spec.slowdown, self->state.opts.slowdown);
        // An empty state with "restore_version" means: rebuild from the
        // snapshots this node already holds (no transfer).
        auto version = j.value("restore_version", int64_t{-1});
        if (state.empty() && version >= 0)
          state = self->state.store.assemble(spec.first_layer, spec.end_layer,
                                             version);
        auto id = ++self->state.deploys;
        self->state.deploying.emplace(id, rp);
        self->send(self->state.builder, deploy_atom::value, id,
                   to_json(spec).dump(), std::move(state));
      } catch (const std::exception& e) {
        rp.deliver(deploy_failure(self->state.opts.name, e.what()), caf::actor{});
      }
      return rp;
    },
    [=](adopt_atom, int64_t id, std::string& err, caf::actor& replica) {
      auto it = self->state.deploying.find(id);
      if (self->current_sender() != caf::actor_cast<caf::strong_actor_ptr>(self->state.builder)
          || it == self->state.deploying.end()) {
        spdlog::error("{}: ignored a replica handed over by a stranger",
                      self->state.opts.name);
        return;
      }
      if (replica)
        self->state.replicas.push_back(replica);
      it->second.deliver(std::move(err), std::move(replica));
      self->state.deploying.erase(it);
    },
    [=](link_atom, const std::string& host, uint16_t port) -> std::string {
      try {
        connect(self->system(), host, port, std::chrono::seconds(5));
        return {};
      } catch (const std::exception& e) {
        spdlog::error("{}: {}", self->state.opts.name, e.what());
        return e.what();
      }
    },
    [=](stop_atom) {
      for (auto& r : self->state.replicas)
        self->send(r, stop_atom::value);
      self->state.replicas.clear();
    },
  };
}

std::atomic<int> stop_signal{0};

extern "C" void on_signal(int sig) { stop_signal = sig; }

} // namespace

caf::actor spawn_device(caf::actor_system& sys, const device_options& opts,
                        std::shared_ptr<data_plane> dp) {
  return sys.spawn<caf::detached>(device_fun, opts, std::move(dp));
}

int run_node(const node_options& opts) {
  kernels::keep_tensor_buffers_in_heap();
  if (opts.device.slowdown < 1.0)
    throw std::invalid_argument("node: --slowdown must be >= 1, got "
                                + std::to_string(opts.device.slowdown));
  if (opts.device.threads > 0)
    torch::set_num_threads(opts.device.threads);
  caf::actor_system_config cfg;
  configure(cfg, opts.net);
  caf::actor_system sys{cfg};
  auto dev_opts = opts.device;
  std::shared_ptr<data_plane> dp;
  if (opts.data_plane) {
    data_plane::options dpo;
    dpo.host = opts.host;
    dpo.port = opts.data_port;
    dpo.rate_Bps = opts.link_rate_Bps;
    dp = data_plane::start(dpo);
  }
  auto device = spawn_device(sys, dev_opts, dp);
  auto port = sys.middleman().publish(device, opts.port, opts.host.c_str(),
                                      true);
  if (!port) {
    caf::anon_send_exit(device, caf::exit_reason::user_shutdown);
    throw std::runtime_error("node " + opts.device.name + ": cannot listen on "
                             + opts.host + ":" + std::to_string(opts.port)
                             + ": " + sys.render(port.error()));
  }
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  std::printf("asteroid node %s listening on %s:%u (memory %lld B, %d "
              "threads, slowdown %.2f%s, data plane %s)\n",
              opts.device.name.c_str(), opts.host.c_str(),
              static_cast<unsigned>(*port),
              static_cast<long long>(opts.device.memory_bytes),
              opts.device.threads, opts.device.slowdown,
              opts.device.slowdown != 1.0 ? " emulated" : "",
              !dp ? "off"
                  : (std::to_string(dp->port())
                     + (opts.link_rate_Bps > 0
                          ? ", paced to " + std::to_string(opts.link_rate_Bps * 8e-6)
                              + " Mbit/s (emulated link)"
                          : ""))
                      .c_str());
  std::fflush(stdout);
  while (stop_signal == 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  spdlog::info("node {}: signal {}, stopping", opts.device.name,
               stop_signal.load());
  caf::anon_send(device, stop_atom::value);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  caf::anon_send_exit(device, caf::exit_reason::user_shutdown);
  sys.middleman().unpublish(device, *port);
  // Replicas quit on stop; do not wait forever for one stuck in compute.
  std::fflush(stdout);
  std::_Exit(0);
}

} // namespace asteroid::actors

// -- local clusters ---------------------------------------------------------------

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

namespace asteroid::actors {

namespace {

template <class T>
T pick(const std::vector<T>& v, int i, T fallback) {
  if (v.empty())
    return fallback;
  return v.size() == 1 ? v[0] : v.at(static_cast<size_t>(i));
}

} // namespace

std::string local_cluster::log_path(int i) const {
  return opts_.log_dir + "/node" + std::to_string(i) + ".log";
}

local_cluster::local_cluster(options opts) : opts_(std::move(opts)) {
  if (opts_.nodes < 1)
    throw std::invalid_argument("cluster: need at least one node");
  for (auto* v : {&opts_.slowdowns})
    if (v->size() > 1 && static_cast<int>(v->size()) != opts_.nodes)
      throw std::invalid_argument("cluster: give one slowdown per node ("
                                  + std::to_string(opts_.nodes) + ")");
  if (opts_.memory.size() > 1
      && static_cast<int>(opts_.memory.size()) != opts_.nodes)
    throw std::invalid_argument("cluster: give one memory budget per node");
  if (opts_.log_dir.empty()) {
    char tmpl[] = "/tmp/asteroid-cluster-XXXXXX";
    if (!mkdtemp(tmpl))
      throw std::runtime_error("cluster: cannot create a log folder");
    opts_.log_dir = tmpl;
    owns_log_dir_ = true;
  } else {
    ::mkdir(opts_.log_dir.c_str(), 0755);
  }
  for (int i = 0; i < opts_.nodes; ++i) {
    auto port = static_cast<uint16_t>(opts_.base_port + i);
    std::vector<std::string> args{
      opts_.exe,
      "node",
      "--listen",
      "127.0.0.1:" + std::to_string(port),
      "--name",
      "node" + std::to_string(i),
      "--memory",
      std::to_string(pick(opts_.memory, i, int64_t{4} << 30)),
      "--threads",
      std::to_string(opts_.threads),
      "--slowdown",
      std::to_string(pick(opts_.slowdowns, i, 1.0))};
    if (opts_.link_rate_mbps > 0) {
      args.push_back("--link-rate");
      args.push_back(std::to_string(opts_.link_rate_mbps));
    }
    auto log = log_path(i);
    // The wait below looks for "listening on" in this file: a previous
    // cluster's log on the same port must not be read before the node
    // truncates it.
    ::unlink(log.c_str());
    auto parent = ::getpid();
    auto pid = ::fork();
    if (pid < 0) {
      stop();
      throw std::runtime_error("cluster: fork failed");
    }
    if (pid == 0) {
      int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) {
        ::dup2(fd, 1);
        ::dup2(fd, 2);
      }
      ::setpgid(0, 0); // a Ctrl-C on the terminal goes to the parent only
      // If the owner dies without running our destructor (SIGKILL, crash),
      // its nodes must not outlive it holding their ports.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent)
        std::_Exit(1);
      std::vector<char*> argv;
      for (auto& a : args)
        argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      std::_Exit(127);
    }
    pids_.push_back(pid);
    endpoints_.push_back("127.0.0.1:" + std::to_string(port));
  }
  // Wait until each node says it listens.
  auto deadline = std::chrono::steady_clock::now() + opts_.start_timeout;
  for (int i = 0; i < opts_.nodes; ++i) {
    for (;;) {
      std::ifstream in{log_path(i)};
      std::stringstream text;
      text << in.rdbuf();
      if (text.str().find("listening on") != std::string::npos)
        break;
      int status = 0;
      if (::waitpid(pids_[i], &status, WNOHANG) == pids_[i]) {
        pids_[i] = -1;
        stop();
        throw std::runtime_error("cluster: node" + std::to_string(i)
                                 + " exited at start; see " + log_path(i)
                                 + ":\n" + text.str());
      }
      if (std::chrono::steady_clock::now() > deadline) {
        stop();
        throw std::runtime_error("cluster: node" + std::to_string(i)
                                 + " did not start in time; see "
                                 + log_path(i));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
}

void local_cluster::stop() {
  for (auto pid : pids_)
    if (pid > 0)
      ::kill(pid, SIGTERM);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  for (auto& pid : pids_) {
    if (pid <= 0)
      continue;
    int status = 0;
    while (::waitpid(pid, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    pid = -1;
  }
}

void local_cluster::remove_own_logs() {
  if (!owns_log_dir_)
    return;
  if (opts_.keep_logs || std::uncaught_exceptions() > uncaught_at_start_) {
    std::fprintf(stderr, "cluster: node logs kept in %s\n", opts_.log_dir.c_str());
    return;
  }
  // Only what the cluster wrote: anything else found there stays, and so does
  // the folder then (rmdir fails on a non-empty folder).
  for (int i = 0; i < opts_.nodes; ++i)
    ::unlink(log_path(i).c_str());
  ::rmdir(opts_.log_dir.c_str());
}

local_cluster::~local_cluster() {
  stop();
  remove_own_logs();
}

} // namespace asteroid::actors
