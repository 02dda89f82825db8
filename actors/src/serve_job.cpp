// Serve files and the serving program (serve.hpp): the requests' inputs, a
// client actor that streams them through the server, and what is written
// afterwards.
#include "asteroid/actors/serve.hpp"

#include "asteroid/actors/job.hpp"
#include "asteroid/actors/remote_probe.hpp"
#include "asteroid/actors/server.hpp"
#include "asteroid/actors/stage_state.hpp"
#include "asteroid/data/make_dataset.hpp"
#include "asteroid/kernels/wire_codec.hpp"
#include "asteroid/planner/chrome_trace.hpp"
#include "asteroid/planner/json_reader.hpp"
#include "asteroid/serialization/checkpoint.hpp"
#include "asteroid/serialization/tensor_wire.hpp"
#include "asteroid/training/metrics_sink.hpp"
#include "asteroid/training/model_options_json.hpp"
#include "asteroid/training/model_registry.hpp"

#include <spdlog/spdlog.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <set>
#include <stdexcept>

namespace asteroid::actors {

using nlohmann::json;

// -- serve files ----------------------------------------------------------------

serve_spec parse_serve(const json& j, const std::string& where) {
  using planner::json_field;
  using planner::read_optional;
  try {
    serve_spec s;
    json_field f{where, ""};
    if (!j.is_object())
      f.fail(std::string("expected an object, got ") + j.type_name());
    planner::check_keys(j, f,
                        {"model", "model_options", "checkpoint", "seed", "nodes",
                         "credentials", "planner", "profile", "measure_links", "plan",
                         "micro_batch",
                         "max_in_flight", "activation_codec", "compress_below_mbps",
                         "data_plane", "dataset",
                         "data_dir", "requests", "metrics", "trace", "outputs",
                         "connect_timeout_ms", "request_timeout_ms", "recover",
                         "heartbeat_ms", "heartbeat_misses"});
    read_optional(j, f, "model", s.model);
    if (auto* x = planner::optional_member(j, "model_options")) {
      if (!x->is_object())
        f["model_options"].fail(std::string("expected an object, got ") + x->type_name());
      try {
        training::model_options_from_json(*x);
      } catch (const std::exception& e) {
        f["model_options"].fail(e.what());
      }
      s.model_options = *x;
    }
    read_optional(j, f, "checkpoint", s.checkpoint);
    read_optional(j, f, "seed", s.seed);
    read_optional(j, f, "nodes", s.nodes);
    read_optional(j, f, "credentials", s.credentials);
    read_optional(j, f, "planner", s.planner);
    static const std::set<std::string> planners{"edgepipe", "straight", "on-device"};
    if (!planners.count(s.planner))
      f["planner"].fail("planner '" + s.planner
                        + "' is not one of edgepipe, straight, on-device");
    read_optional(j, f, "profile", s.profile_path);
    read_optional(j, f, "measure_links", s.measure_links);
    if (auto* x = planner::optional_member(j, "plan")) {
      auto pf = f["plan"];
      planner::check_keys(*x, pf, {"stages"});
      const auto& stages = planner::get_array(planner::member(*x, pf, "stages"), pf["stages"]);
      if (stages.empty())
        pf["stages"].fail("no stages");
      planner::inference_plan p;
      p.planner = "given";
      for (size_t i = 0; i < stages.size(); ++i) {
        auto sf = pf["stages"][i];
        planner::check_keys(stages[i], sf, {"first_layer", "end_layer", "device"});
        planner::inference_stage st;
        planner::read_required(stages[i], sf, "first_layer", st.first_layer);
        planner::read_required(stages[i], sf, "end_layer", st.end_layer);
        planner::read_required(stages[i], sf, "device", st.device);
        p.stages.push_back(st);
      }
      s.plan = p;
    }
    planner::read_optional_at_least(j, f, "micro_batch", s.micro_batch, int64_t{1});
    read_optional(j, f, "max_in_flight", s.max_in_flight);
    if (s.max_in_flight < 0)
      f["max_in_flight"].fail("must be >= 0 (0: stages + 1)");
    read_optional(j, f, "activation_codec", s.activation_codec);
    try {
      kernels::parse_wire_codec(s.activation_codec);
    } catch (const std::exception& e) {
      f["activation_codec"].fail(e.what());
    }
    read_optional(j, f, "compress_below_mbps", s.compress_below_mbps);
    if (!(s.compress_below_mbps >= 0))
      f["compress_below_mbps"].fail("must be >= 0 (0: every link compressed)");
    read_optional(j, f, "data_plane", s.data_plane);
    read_optional(j, f, "dataset", s.dataset);
    static const std::set<std::string> datasets{"fashion-mnist", "cifar10", "synthetic"};
    if (!datasets.count(s.dataset))
      f["dataset"].fail("dataset '" + s.dataset
                        + "' is not one of fashion-mnist, cifar10, synthetic");
    read_optional(j, f, "data_dir", s.data_dir);
    planner::read_optional_at_least(j, f, "requests", s.requests, int64_t{1});
    read_optional(j, f, "metrics", s.metrics_path);
    read_optional(j, f, "trace", s.trace_path);
    read_optional(j, f, "outputs", s.outputs_path);
    planner::read_optional_in(j, f, "connect_timeout_ms", s.connect_timeout_ms, int64_t{1},
                              longest_wait_ms);
    planner::read_optional_in(j, f, "request_timeout_ms", s.request_timeout_ms, int64_t{1},
                              longest_wait_ms);
    read_optional(j, f, "recover", s.recover);
    planner::read_optional_in(j, f, "heartbeat_ms", s.heartbeat_ms, int64_t{1}, longest_wait_ms);
    planner::read_optional_at_least(j, f, "heartbeat_misses", s.heartbeat_misses, int{1});
    if (s.heartbeat_ms * s.heartbeat_misses > longest_wait_ms)
      f["heartbeat_misses"].fail("heartbeat_ms x heartbeat_misses must be at most "
                                 + std::to_string(longest_wait_ms) + " ms");
    return s;
  } catch (const planner::json_error& e) {
    throw std::invalid_argument(e.what());
  }
}

serve_spec load_serve_file(const std::string& path) {
  std::ifstream in{path};
  if (!in)
    throw std::invalid_argument("serve file " + path + ": cannot open");
  json j;
  try {
    in >> j;
  } catch (const json::exception& e) {
    throw std::invalid_argument("serve file " + path + ": " + e.what());
  }
  return parse_serve(j, "serve file " + path);
}

// -- the client -------------------------------------------------------------------

request_source request_source::of(std::vector<torch::Tensor> inputs) {
  auto held = std::make_shared<const std::vector<torch::Tensor>>(std::move(inputs));
  return {static_cast<int64_t>(held->size()),
          [held](int64_t i) { return (*held)[static_cast<size_t>(i)]; }};
}

namespace {

using client_clock = std::chrono::steady_clock;

/// What the client actor gathers; read by run_serve after the client said
/// it is done.
struct client_outcome {
  std::string error;
  std::string plan_json;
  std::vector<torch::Tensor> outputs;
  std::vector<double> latency_ms; ///< send to answer, at the client
  std::string stats_json;
};

using done_signal = caf::atom_constant<caf::atom("ast_sdone")>;

struct client_state {
  server_actor server;
  request_source source;
  std::shared_ptr<client_outcome> out;
  caf::actor report;
  int outstanding = 1;
  std::chrono::milliseconds request_timeout{0};
  size_t next = 0;
  size_t answered = 0;
  bool over = false;
};

using client_self = caf::stateful_actor<client_state>*;

/// Asks for the server's stats, tells `report` the client is done and quits.
void finish(client_self self, std::string error) {
  auto& st = self->state;
  if (st.over)
    return;
  st.over = true;
  if (!error.empty() && st.out->error.empty())
    st.out->error = std::move(error);
  auto done = [=] {
    self->send(self->state.report, done_signal::value);
    self->quit();
  };
  self->request(st.server, st.request_timeout, stats_atom::value)
    .then(
      [=](std::string& stats) {
        self->state.out->stats_json = std::move(stats);
        done();
      },
      [=](caf::error&) { done(); });
}

void send_next(client_self self) {
  auto& st = self->state;
  if (st.over || st.next >= static_cast<size_t>(st.source.count))
    return;
  const size_t i = st.next++;
  auto sent = client_clock::now();
  // Bounded: the server fails a request its pipeline does not answer in
  // request_timeout, and this one may wait behind `outstanding` others.
  auto bound = st.request_timeout * (st.outstanding + 2);
  self
    ->request(st.server, bound, infer_atom::value,
              serialization::encode_tensor(st.source.input(static_cast<int64_t>(i))))
    .then(
      [=](std::string& err, std::string& output) {
        auto& st = self->state;
        if (st.over)
          return;
        if (!err.empty())
          return finish(self, err);
        try {
          st.out->outputs[i] = serialization::decode_tensor(output);
        } catch (const std::exception& e) {
          return finish(self, "request " + std::to_string(i)
                                + ": the answer does not decode: " + e.what());
        }
        st.out->latency_ms[i] =
          std::chrono::duration<double, std::milli>(client_clock::now() - sent).count();
        if (++st.answered == static_cast<size_t>(st.source.count))
          return finish(self, {});
        send_next(self);
      },
      [=](caf::error& e) {
        finish(self, "request " + std::to_string(i) + ": " + self->system().render(e));
      });
}

/// Starts the server, keeps `outstanding` requests open, records every
/// answer in order, asks for the stats and tells `report` it is done.
caf::behavior serve_client(client_self self, server_actor server, request_source source,
                           std::shared_ptr<client_outcome> out, caf::actor report,
                           int outstanding, std::chrono::milliseconds request_timeout) {
  auto& st = self->state;
  st.server = std::move(server);
  st.source = std::move(source);
  st.out = std::move(out);
  st.report = std::move(report);
  st.outstanding = outstanding;
  st.request_timeout = request_timeout;
  st.out->outputs.resize(static_cast<size_t>(st.source.count));
  st.out->latency_ms.resize(static_cast<size_t>(st.source.count));
  self->request(st.server, request_timeout * 4, start_atom::value)
    .then(
      [=](std::string& err, std::string& plan) {
        if (!err.empty())
          return finish(self, err);
        self->state.out->plan_json = std::move(plan);
        for (int k = 0; k < self->state.outstanding; ++k)
          send_next(self);
      },
      [=](caf::error& e) { finish(self, "starting the server: " + self->system().render(e)); });
  return {[](done_signal) {}};
}

planner::inference_plan plan_from_json(const json& j) {
  planner::inference_plan p;
  p.planner = j.value("planner", std::string{});
  p.micro_batch = j.value("micro_batch", int64_t{0});
  p.bottleneck_s = j.value("bottleneck_s", 0.0);
  p.samples_per_s = j.value("samples_per_s", 0.0);
  p.latency_s = j.value("latency_s", 0.0);
  for (const auto& s : j.value("stages", json::array())) {
    planner::inference_stage st;
    st.first_layer = s.value("first_layer", 0);
    st.end_layer = s.value("end_layer", 0);
    st.device = s.value("device", 0);
    st.compute_s = s.value("compute_s", 0.0);
    st.send_s = s.value("send_s", 0.0);
    st.memory_bytes = s.value("memory_bytes", int64_t{0});
    p.stages.push_back(st);
  }
  return p;
}

} // namespace

std::string describe_links(const json& links) {
  if (!links.is_object())
    return links.is_string() ? links.get<std::string>() : std::string("unknown");
  double slowest = links.value("link_mbps", 0.0);
  if (links.contains("bandwidth_mbps")) {
    slowest = 0;
    const auto& m = links["bandwidth_mbps"];
    for (size_t i = 0; i < m.size(); ++i)
      for (size_t j = 0; j < m[i].size(); ++j)
        if (i != j && m[i][j].is_number() && (slowest == 0 || m[i][j].get<double>() < slowest))
          slowest = m[i][j].get<double>();
  }
  return "measured, slowest " + std::to_string(static_cast<int64_t>(slowest / 8)) + " MB/s";
}

serve_result run_serve(caf::actor_system& sys, const serve_spec& spec,
                       const std::vector<device_actor>& devices,
                       models::sequential_model model,
                       const request_source& source,
                       const torch::Tensor& labels,
                       const std::function<bool()>& stop_wanted) {
  if (source.count < 1 || !source.input)
    throw std::invalid_argument("serve: no requests to send");
  server_options so;
  so.model = spec.model;
  so.model_options = spec.model_options;
  so.nodes = spec.nodes;
  if (spec.plan)
    so.plan = *spec.plan;
  so.planner = spec.planner;
  so.profile_path = spec.profile_path;
  so.micro_batch = spec.micro_batch;
  so.max_in_flight = spec.max_in_flight;
  so.activation_codec = spec.activation_codec;
  so.compress_below_mbps = spec.compress_below_mbps;
  so.data_plane = spec.data_plane;
  so.connect_timeout_ms = spec.connect_timeout_ms;
  so.request_timeout_ms = spec.request_timeout_ms;
  so.recover = spec.recover;
  so.heartbeat_ms = spec.heartbeat_ms;
  so.heartbeat_misses = spec.heartbeat_misses;
  so.profile = spec.profile;
  // The links matter to the planner, and to which of them compress.
  const bool links_matter
    = (!spec.plan && spec.planner != "on-device")
      || (spec.compress_below_mbps > 0 && spec.activation_codec != "none");
  if (spec.measure_links && links_matter && devices.size() > 1
      && spec.nodes.size() == devices.size()) {
    // Before the server claims the nodes: a probe is answered by a free node.
    link_probe_options lp;
    lp.timeout = std::chrono::milliseconds(spec.connect_timeout_ms) + std::chrono::seconds(5);
    so.links = measure_cluster(sys, devices, spec.nodes, 0, lp);
  }
  auto server = spawn_server(sys, so, devices, std::move(model));
  const int window = spec.max_in_flight > 0 ? spec.max_in_flight
                                            : static_cast<int>(devices.size()) + 1;
  auto out = std::make_shared<client_outcome>();
  const auto timeout = std::chrono::milliseconds(spec.request_timeout_ms);
  caf::scoped_actor waiter{sys};
  // Monitored now, before the server's handle reaches any node. CAF 0.17.6
  // sends an actor's down messages newest monitor first
  // (monitorable_actor::cleanup), each with the dead actor as its sender, a
  // strong reference. The oldest monitor, the waiter's down message comes
  // after the one to the BASP broker (it monitors the server once a node holds
  // the server's handle). Monitored last, the waiter heard first: this
  // function returned and the actor system stopped its middleman while the
  // server still sent the broker's down message; a stopped broker never
  // empties its mailbox (abstract_broker::cleanup), so that message kept the
  // server from being destroyed and ~actor_system waited for its thread for
  // ever. A down message that comes while the loop below waits is skipped
  // there and taken by the receive after it.
  waiter->monitor(server);
  // Twice the server's window: its queue never runs dry while answers
  // travel back, and the client's memory stays bounded.
  sys.spawn(serve_client, server, source, out, caf::actor{waiter}, 2 * window, timeout);
  // Every request is bounded by the server's timeout; this bounds the whole,
  // at most a century: a week's timeout times many requests would overflow
  // the clock's nanoseconds and put the deadline in the past.
  const int64_t waits = source.count + 8;
  const int64_t century_ms = int64_t{100} * 365 * 24 * 3600 * 1000;
  const auto whole = std::chrono::milliseconds(
    timeout.count() > century_ms / waits ? century_ms : timeout.count() * waits);
  auto until = std::chrono::steady_clock::now() + whole;
  bool done = false;
  bool stop_sent = false;
  while (!done && std::chrono::steady_clock::now() < until) {
    waiter->receive([&](done_signal) { done = true; },
                    caf::after(std::chrono::milliseconds(100)) >> [] {});
    if (!done && !stop_sent && stop_wanted && stop_wanted()) {
      // The server fails what is not answered; the client then ends.
      caf::anon_send(server, stop_atom::value);
      stop_sent = true;
    }
  }
  // Until the server has ended: an actor system shut down while its
  // detached server still ends would wait for that server for ever. Its down
  // message to the waiter is the last it sends (see the monitor above).
  caf::anon_send(server, stop_atom::value);
  waiter->receive([](caf::down_msg&) {},
                  caf::after(std::chrono::seconds(10)) >> [] {
                    spdlog::warn("serve: the server did not end within 10 s of its stop");
                  });
  if (!done)
    throw std::runtime_error("serve: no end within " + std::to_string(whole.count()) + " ms");
  if (!out->error.empty())
    throw std::runtime_error("serve: " + out->error);
  serve_result r;
  r.plan = plan_from_json(json::parse(out->plan_json));
  r.stats = json::parse(out->stats_json.empty() ? "{}" : out->stats_json);
  r.requests = r.stats.value("requests", int64_t{0});
  r.samples = r.stats.value("samples", int64_t{0});
  r.seconds = r.stats.value("seconds", 0.0);
  r.samples_per_s = r.stats.value("samples_per_s", 0.0);
  r.steady_samples_per_s = r.stats.value("steady_samples_per_s", 0.0);
  r.latency_p50_ms = r.stats.value("latency_p50_ms", 0.0);
  r.latency_p99_ms = r.stats.value("latency_p99_ms", 0.0);
  r.outputs = torch::cat(out->outputs);
  if (labels.defined() && labels.numel() == r.outputs.size(0))
    r.accuracy = r.outputs.argmax(1).eq(labels).to(torch::kFloat64).mean().item<double>();
  r.stats["client_latency_ms"] = out->latency_ms;
  return r;
}

namespace {

/// The model served and its weights: the checkpoint's, or drawn from the seed.
models::sequential_model served_model(serve_spec& spec) {
  if (spec.checkpoint.empty()) {
    torch::manual_seed(spec.seed);
    return training::build_model(spec.model, spec.model_options);
  }
  auto ck = serialization::load_checkpoint(spec.checkpoint);
  const auto where = "checkpoint '" + spec.checkpoint + "'";
  auto options = json::parse(ck.model_options_json, nullptr, false);
  if (options.is_discarded() || !options.is_object())
    throw std::invalid_argument(where + ": its model options do not parse");
  spec.model = ck.model_name;
  spec.model_options = options;
  auto model = training::build_model(spec.model, spec.model_options);
  const int L = static_cast<int>(model->size());
  try {
    // A job's checkpoint holds stage states ("w/..."); a single-device
    // trainer's holds the model's own state.
    if (covers(model, 0, L, ck.model_state))
      load_stage_state(model, 0, L, nullptr, ck.model_state);
    else
      model->load_range_state(0, -1, ck.model_state);
  } catch (const std::exception& e) {
    throw std::invalid_argument(where + ": " + e.what());
  }
  return model;
}

struct request_set {
  request_source source;
  torch::Tensor labels;
};

request_set make_requests(const serve_spec& spec, const models::sequential_model& model) {
  request_set r;
  r.source.count = spec.requests;
  const int64_t rows = spec.micro_batch;
  if (spec.dataset == "synthetic") {
    std::vector<int64_t> shape{rows};
    for (auto d : model->input_shape())
      shape.push_back(d);
    const bool tokens = model->input_dtype() == torch::kInt64;
    const auto vocab = spec.model_options.value("vocab_size", int64_t{30522});
    const auto seed = spec.seed;
    // Request i's inputs from its own generator: the same whatever was
    // sent before it.
    r.source.input = [=](int64_t i) {
      auto gen = at::detail::createCPUGenerator(seed * 1000003 + static_cast<uint64_t>(i));
      return tokens ? torch::randint(0, vocab, shape, gen, torch::kInt64)
                    : torch::randn(shape, gen);
    };
    return r;
  }
  data::dataset_options o;
  o.path = spec.data_dir;
  o.split = data::split::test;
  auto ds = data::make_dataset(spec.dataset, o);
  auto all = std::make_shared<data::batch>(ds->get_range(0, ds->size()));
  const int64_t size = ds->size();
  // Cycled when more samples are asked for than the split holds.
  auto rows_of = [=](int64_t i) {
    return torch::arange(i * rows, (i + 1) * rows, torch::kInt64).remainder(size);
  };
  r.source.input = [=](int64_t i) { return all->inputs.index_select(0, rows_of(i)); };
  r.labels = all->targets.index_select(
    0, torch::arange(spec.requests * rows, torch::kInt64).remainder(size));
  return r;
}

void write_outputs(const serve_spec& spec, const serve_result& r) {
  if (spec.outputs_path.empty())
    return;
  std::ofstream out{spec.outputs_path};
  if (!out)
    throw std::runtime_error("outputs '" + spec.outputs_path + "': cannot write");
  auto top = r.outputs.argmax(1);
  for (int64_t i = 0; i < spec.requests; ++i) {
    auto rows = top.slice(0, i * spec.micro_batch, (i + 1) * spec.micro_batch);
    std::vector<int64_t> classes(rows.data_ptr<int64_t>(),
                                 rows.data_ptr<int64_t>() + rows.numel());
    out << json{{"request", i}, {"top1", classes}}.dump() << "\n";
  }
}

void write_trace(const serve_spec& spec, const serve_result& r) {
  if (spec.trace_path.empty())
    return;
  planner::chrome_trace trace;
  double t0 = -1;
  for (const auto& s : r.stats.value("stages", json::array()))
    for (const auto& e : s.value("events", json::array()))
      if (t0 < 0 || e.value("ts", 0.0) < t0)
        t0 = e.value("ts", 0.0);
  for (const auto& s : r.stats.value("stages", json::array())) {
    int stage = s.value("stage", 0);
    trace.process_names[stage] = s.value("label", "stage " + std::to_string(stage));
    trace.thread_names[{stage, 0}] = "compute";
    for (const auto& e : s.value("events", json::array()))
      trace.events.push_back({e.value("name", std::string{}), "compute",
                              e.value("ts", 0.0) - t0, e.value("dur", 0.0), stage, 0,
                              {{"queue", e.value("queue", int64_t{0})}}});
  }
  planner::write_chrome_trace(trace, spec.trace_path);
}

} // namespace

serve_result run_serve(const serve_spec& given, const std::function<bool()>& stop_wanted) {
  auto spec = given;
  if (spec.nodes.empty())
    throw std::invalid_argument("serve: no nodes to serve on ('nodes' of the serve file)");
  net_options net;
  if (!spec.credentials.empty())
    net.tls = credentials::from_folder(spec.credentials);
  auto model = served_model(spec);
  auto requests = make_requests(spec, model);
  // Opened first: a path that cannot be written fails before any node is
  // claimed, and "time" counts from here.
  training::metrics_sink metrics{spec.metrics_path};
  // Before the actor system starts: its threads make a profile taken
  // beside them slower than the nodes compute (server.hpp).
  if (!spec.plan && spec.profile_path.empty() && !spec.profile)
    spec.profile = profile_for_serving(spec.model, spec.model_options, spec.micro_batch);
  caf::actor_system_config cfg;
  configure(cfg, net);
  caf::actor_system sys{cfg};
  auto devices = connect_all(sys, spec.nodes,
                             std::chrono::milliseconds(spec.connect_timeout_ms));
  auto r = run_serve(sys, spec, devices, model, requests.source, requests.labels,
                     stop_wanted);
  json plan;
  to_json(plan, r.plan);
  metrics.emit("plan", plan);
  const auto& client_ms = r.stats["client_latency_ms"];
  for (int64_t i = 0; i < r.requests && static_cast<size_t>(i) < client_ms.size(); ++i)
    metrics.emit("request", {{"request", i},
                             {"rows", spec.micro_batch},
                             {"latency_ms", client_ms[static_cast<size_t>(i)]}});
  json summary = r.stats;
  summary.erase("client_latency_ms");
  if (summary.contains("stages"))
    for (auto& s : summary["stages"]) {
      s.erase("events");
      if (r.seconds > 0)
        s["utilization"] = s.value("busy_s", 0.0) / r.seconds;
    }
  if (r.accuracy >= 0)
    summary["accuracy"] = r.accuracy;
  metrics.emit("done", summary);
  write_outputs(spec, r);
  write_trace(spec, r);
  return r;
}

} // namespace asteroid::actors
