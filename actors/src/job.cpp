#include "asteroid/actors/job.hpp"

#include "asteroid/actors/node.hpp"
#include "asteroid/actors/replica.hpp"
#include "asteroid/data/make_dataset.hpp"
#include "asteroid/data/sampler.hpp"
#include "asteroid/planner/chrome_trace.hpp"
#include "asteroid/planner/json_io.hpp"
#include "asteroid/planner/plan_validation.hpp"
#include "asteroid/planner/planner.hpp"
#include "asteroid/planner/schedule.hpp"
#include "asteroid/serialization/tensor_wire.hpp"
#include "asteroid/training/evaluate.hpp"
#include "asteroid/training/metrics_sink.hpp"
#include "asteroid/training/model_options_json.hpp"
#include "asteroid/training/profiler.hpp"
#include "asteroid/training/progress_line.hpp"

#include <spdlog/spdlog.h>

#include <chrono>
#include <fstream>
#include <map>
#include <set>
#include <stdexcept>

namespace asteroid::actors {

using nlohmann::json;

// -- job files ------------------------------------------------------------------

job_spec parse_job(const json& j, const std::string& where) {
  job_spec s;
  auto field = [&](const char* key, auto& dst) {
    if (!j.contains(key))
      return;
    try {
      j.at(key).get_to(dst);
    } catch (const json::exception& e) {
      throw std::invalid_argument(where + ": field '" + key + "': "
                                  + e.what());
    }
  };
  if (!j.is_object())
    throw std::invalid_argument(where + ": expected a JSON object");
  static const std::set<std::string> known{
    "model", "model_options", "dataset", "data_dir", "train_limit",
    "test_limit", "synthetic_count", "batch_size", "micro_batches",
    "optimizer", "lr", "momentum", "weight_decay", "epochs", "max_steps",
    "seed", "nodes", "plan", "planner", "schedule", "credit_window",
    "metrics", "trace", "trace_steps", "evaluate", "progress",
    "connect_timeout_ms", "step_timeout_ms", "profile"};
  for (auto& [key, value] : j.items())
    if (!known.count(key))
      throw std::invalid_argument(where + ": unknown field '" + key + "'");
  field("model", s.model);
  if (j.contains("model_options"))
    s.model_options = j.at("model_options");
  field("dataset", s.dataset);
  field("data_dir", s.data_dir);
  field("train_limit", s.train_limit);
  field("test_limit", s.test_limit);
  field("synthetic_count", s.synthetic_count);
  field("batch_size", s.batch_size);
  field("micro_batches", s.micro_batches);
  std::string opt = "sgd";
  field("optimizer", opt);
  try {
    s.optimizer.kind = training::parse_optimizer(opt);
  } catch (const std::exception& e) {
    throw std::invalid_argument(where + ": field 'optimizer': " + e.what());
  }
  field("lr", s.optimizer.lr);
  field("momentum", s.optimizer.momentum);
  field("weight_decay", s.optimizer.weight_decay);
  field("epochs", s.epochs);
  field("max_steps", s.max_steps);
  field("seed", s.seed);
  field("nodes", s.nodes);
  field("planner", s.planner);
  field("profile", s.profile_path);
  field("schedule", s.schedule);
  field("credit_window", s.credit_window);
  field("metrics", s.metrics_path);
  field("trace", s.trace_path);
  field("trace_steps", s.trace_steps);
  field("evaluate", s.evaluate);
  field("progress", s.progress);
  field("connect_timeout_ms", s.connect_timeout_ms);
  field("step_timeout_ms", s.step_timeout_ms);
  if (j.contains("plan")) {
    const auto& p = j.at("plan");
    if (p.is_string()) {
      s.plan = planner::load_plan_file(p.get<std::string>());
    } else {
      s.plan = planner::parse_plan(p, where + ": plan");
    }
  }
  if (!s.plan && s.planner.empty())
    throw std::invalid_argument(where
                                + ": give a 'plan' or \"planner\": \"asteroid\"");
  if (s.nodes.empty())
    throw std::invalid_argument(where + ": field 'nodes' is empty");
  for (auto& n : s.nodes)
    parse_endpoint(n); // throws naming the endpoint
  if (s.batch_size < 1 || s.micro_batches < 1
      || s.batch_size % s.micro_batches != 0)
    throw std::invalid_argument(where
                                + ": batch_size must be a positive multiple "
                                  "of micro_batches");
  planner::parse_schedule_kind(s.schedule);
  return s;
}

job_spec load_job_file(const std::string& path) {
  std::ifstream in{path};
  if (!in)
    throw std::invalid_argument("job file " + path + ": cannot open");
  json j;
  try {
    in >> j;
  } catch (const json::exception& e) {
    throw std::invalid_argument("job file " + path + ": " + e.what());
  }
  return parse_job(j, "job file " + path);
}

// -- plan checks --------------------------------------------------------------------

void check_plan_fits(const planner::plan& p,
                     const models::sequential_model& model,
                     const std::string& model_name, int num_devices) {
  auto L = static_cast<int>(model->size());
  auto layer = [&](int i) {
    return i >= 0 && i < L ? "'" + model->layer_name(i) + "' (" + std::to_string(i) + ")"
                           : "(" + std::to_string(i) + ")";
  };
  if (p.stages.empty())
    throw std::invalid_argument("plan: no stages");
  int expect = 0;
  for (size_t s = 0; s < p.stages.size(); ++s) {
    const auto& st = p.stages[s];
    auto where = "plan stage " + std::to_string(s) + " (layers ["
                 + std::to_string(st.first_layer) + ", "
                 + std::to_string(st.end_layer) + "))";
    if (st.end_layer > L)
      throw std::invalid_argument(
        where + ": layer " + std::to_string(L) + " does not exist: model '"
        + model_name + "' has " + std::to_string(L) + " layers, the last is "
        + layer(L - 1));
    if (st.first_layer != expect)
      throw std::invalid_argument(
        where + ": must start at layer " + layer(expect)
        + (st.first_layer > expect ? ", which no stage covers"
                                   : ", layer " + layer(st.first_layer)
                                       + " is in two stages"));
    if (st.end_layer <= st.first_layer)
      throw std::invalid_argument(where + ": holds no layer");
    expect = st.end_layer;
  }
  if (expect != L)
    throw std::invalid_argument("plan: layer " + layer(expect)
                                + " of model '" + model_name
                                + "' is in no stage");
  planner::cluster c;
  for (int i = 0; i < num_devices; ++i)
    c.devices.push_back({"device" + std::to_string(i), "local", 1.0, 1, ""});
  planner::validate(p, L, c);
}

// -- the supervisor -------------------------------------------------------------------

namespace {

double wall_us() {
  return std::chrono::duration<double, std::micro>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

struct replica_ref {
  int stage;
  int replica;
  int device;
  caf::actor handle;
};

std::string caps_of(caf::scoped_actor& self, const caf::actor& dev,
                    std::chrono::milliseconds timeout, const std::string& who) {
  std::string out;
  std::string err;
  self->request(dev, timeout, caps_atom::value)
    .receive([&](std::string& s) { out = std::move(s); },
             [&](caf::error& e) { err = self->system().render(e); });
  if (!err.empty())
    throw std::runtime_error("node " + who + " did not report capabilities: "
                             + err);
  return out;
}

} // namespace

job_result run_job(caf::actor_system& sys, const job_spec& job,
                   const std::vector<caf::actor>& devices,
                   models::sequential_model model,
                   std::shared_ptr<data::dataset> train,
                   std::shared_ptr<data::dataset> test) {
  using namespace std::chrono;
  auto connect_timeout = milliseconds(job.connect_timeout_ms);
  caf::scoped_actor self{sys};
  auto who = [&](int d) {
    return d < static_cast<int>(job.nodes.size()) ? job.nodes[d]
                                                  : "device " + std::to_string(d);
  };
  // -- capabilities --
  std::vector<json> caps;
  for (size_t d = 0; d < devices.size(); ++d) {
    self->monitor(devices[d]);
    caps.push_back(json::parse(
      caps_of(self, devices[d], connect_timeout, who(static_cast<int>(d)))));
  }
  // -- plan --
  planner::plan plan;
  if (job.plan) {
    plan = *job.plan;
  } else {
    training::profiler_options popts;
    auto mb = job.batch_size;
    popts.batch_sizes = {1, std::max<int64_t>(1, mb / 4), mb};
    popts.repeats = 3;
    planner::model_profile profile;
    try {
      if (!job.profile_path.empty())
        profile = planner::load_model_profile_file(job.profile_path);
      else
        profile = training::profile_model(model, job.model, popts);
    } catch (const std::exception& e) {
      throw std::runtime_error("planner '" + job.planner + "': profiling model '"
                               + job.model + "' failed: " + e.what());
    }
    if (profile.num_layers() != model->size())
      throw std::invalid_argument(
        "profile of '" + profile.model + "' has "
        + std::to_string(profile.num_layers()) + " layers, model '" + job.model
        + "' has " + std::to_string(model->size()));
    std::vector<planner::device_spec> specs;
    for (size_t d = 0; d < devices.size(); ++d)
      specs.push_back({caps[d].value("name", who(static_cast<int>(d))), "local",
                       1.0 / caps[d].value("slowdown", 1.0),
                       caps[d].value("memory_bytes", int64_t{4} << 30),
                       d < job.nodes.size() ? job.nodes[d] : ""});
    auto c = planner::cluster::uniform("job", specs, 1e9);
    plan = planner::make_planner(job.planner)->make_plan(profile, c,
                                                         job.batch_size);
    spdlog::info("planner {}: {} stages, {} micro-batches, predicted {:.1f} "
                 "samples/s",
                 job.planner, plan.num_stages(), plan.micro_batches,
                 plan.predicted_samples_per_s);
  }
  if (plan.batch_size == 0)
    plan.batch_size = job.batch_size;
  if (plan.batch_size != job.batch_size)
    throw std::invalid_argument("plan batch size "
                                + std::to_string(plan.batch_size)
                                + " differs from the job's "
                                + std::to_string(job.batch_size));
  check_plan_fits(plan, model, job.model, static_cast<int>(devices.size()));
  const auto P = plan.num_stages();
  const auto M = plan.micro_batches;
  const auto B = plan.batch_size;
  const auto mbs = plan.micro_batch_size();
  // -- direct links between the nodes, so tensors skip this process --
  for (size_t d = 0; d < devices.size(); ++d)
    for (size_t e = 0; e < devices.size(); ++e) {
      if (d == e || e >= job.nodes.size() || d >= job.nodes.size())
        continue;
      auto [host, port] = parse_endpoint(job.nodes[e]);
      std::string err;
      self->request(devices[d], connect_timeout + seconds(5), link_atom::value,
                    host, port)
        .receive([&](std::string& s) { err = s; },
                 [&](caf::error& x) { err = sys.render(x); });
      if (!err.empty())
        throw std::runtime_error("node " + who(d) + " cannot reach node "
                                 + who(e) + ": " + err);
    }
  // -- deploy --
  std::vector<std::vector<replica_ref>> stages(P);
  auto window = job.credit_window > 0 ? job.credit_window : P + 1;
  for (int s = 0; s < P; ++s) {
    const auto& st = plan.stages[s];
    auto weights = serialization::encode_tensors(
      model->range_state(st.first_layer, st.end_layer));
    for (size_t r = 0; r < st.devices.size(); ++r) {
      replica_spec spec;
      spec.model = job.model;
      spec.model_options = job.model_options;
      spec.stage = s;
      spec.num_stages = P;
      spec.replica = static_cast<int>(r);
      spec.first_layer = st.first_layer;
      spec.end_layer = st.end_layer;
      spec.batch_size = B;
      spec.micro_batches = M;
      spec.shares = st.shares;
      if (s > 0)
        spec.prev_shares = plan.stages[s - 1].shares;
      if (s + 1 < P)
        spec.next_shares = plan.stages[s + 1].shares;
      spec.schedule = job.schedule;
      spec.optimizer = job.optimizer;
      spec.credit_window = window;
      spec.slowdown = 1.0;
      spec.recv_timeout_ms = job.step_timeout_ms;
      auto d = st.devices[r];
      spec.label = "s" + std::to_string(s) + "r" + std::to_string(r) + "@"
                   + caps[d].value("name", who(d));
      std::string err;
      caf::actor handle;
      self->request(devices[d], connect_timeout + seconds(30),
                    deploy_atom::value, to_json(spec).dump(), weights)
        .receive(
          [&](std::string& e, caf::actor& a) {
            err = e;
            handle = a;
          },
          [&](caf::error& x) { err = sys.render(x); });
      if (!err.empty() || !handle)
        throw std::runtime_error("deploying stage " + std::to_string(s)
                                 + " replica " + std::to_string(r)
                                 + " on node " + who(d) + ": " + err);
      self->monitor(handle);
      stages[s].push_back({s, static_cast<int>(r), d, handle});
    }
  }
  auto shutdown = [&] {
    for (auto& st : stages)
      for (auto& r : st)
        self->send(r.handle, stop_atom::value);
  };
  // -- wiring --
  int num_replicas = 0;
  for (int s = 0; s < P; ++s) {
    auto n = static_cast<int>(stages[s].size());
    for (auto& r : stages[s]) {
      ++num_replicas;
      self->send(r.handle, peer_atom::value, int32_t{peer_supervisor},
                 int32_t{0}, caf::actor_cast<caf::actor>(self));
      if (s > 0)
        for (auto& q : stages[s - 1])
          self->send(r.handle, peer_atom::value, int32_t{peer_prev},
                     static_cast<int32_t>(q.replica), q.handle);
      if (s + 1 < P)
        for (auto& q : stages[s + 1])
          self->send(r.handle, peer_atom::value, int32_t{peer_next},
                     static_cast<int32_t>(q.replica), q.handle);
      if (n > 1)
        self->send(r.handle, peer_atom::value, int32_t{peer_ring_next},
                   int32_t{0}, stages[s][(r.replica + 1) % n].handle);
    }
  }
  // -- iterations --
  job_result result;
  result.plan = plan;
  training::metrics_sink metrics{job.metrics_path};
  training::progress_line progress{job.progress};
  planner::chrome_trace trace;
  for (size_t d = 0; d < devices.size(); ++d)
    trace.process_names[static_cast<int>(d)] = caps[d].value("name", who(d));
  for (auto& st : stages)
    for (auto& r : st)
      trace.thread_names[{r.device, 100 * r.stage + r.replica}]
        = "s" + std::to_string(r.stage) + "r" + std::to_string(r.replica);
  data::sampler order{train->size(), job.seed};
  auto per_epoch = train->size() / B;
  if (per_epoch < 1)
    throw std::invalid_argument("dataset has fewer samples than one batch");
  int64_t total_steps = job.epochs * per_epoch;
  if (job.max_steps >= 0)
    total_steps = std::min(total_steps, job.max_steps);
  metrics.emit("start", {{"model", job.model},
                         {"stages", P},
                         {"micro_batches", M},
                         {"batch_size", B},
                         {"replicas", num_replicas},
                         {"steps", total_steps}});
  auto t_start = wall_us();
  int64_t step = 0;
  try {
    for (int64_t epoch = 0; step < total_steps; ++epoch) {
      auto batches = order.batches(epoch, B, true);
      for (size_t bi = 0; bi < batches.size() && step < total_steps;
           ++bi, ++step) {
        auto t0 = wall_us();
        auto batch = train->get_batch(batches[bi]);
        // Feed the first stage's inputs and the last stage's labels.
        std::map<caf::actor, serialization::named_tensors> feed;
        for (int s : {0, P - 1}) {
            int64_t at = 0;
          for (size_t r = 0; r < plan.stages[s].shares.size(); ++r) {
            auto share = plan.stages[s].shares[r];
            auto& list = feed[stages[s][r].handle];
            for (int m = 0; m < M; ++m) {
              auto b0 = m * mbs + at, b1 = b0 + share;
              if (s == 0)
                list.emplace_back("x" + std::to_string(m),
                                  batch.inputs.slice(0, b0, b1));
              if (s == P - 1)
                list.emplace_back("y" + std::to_string(m),
                                  batch.targets.slice(0, b0, b1));
            }
            at += share;
          }
          if (P == 1)
            break;
        }
        for (auto& [h, list] : feed)
          self->send(h, load_atom::value, step,
                     serialization::encode_tensors(list));
        for (auto& st : stages)
          for (auto& r : st)
            self->send(r.handle, start_atom::value, step);
        // Wait for every replica's report.
        std::vector<json> reports;
        std::string failure;
        auto deadline = steady_clock::now() + milliseconds(job.step_timeout_ms);
        while (static_cast<int>(reports.size()) < num_replicas
               && failure.empty()) {
          auto left = duration_cast<milliseconds>(deadline - steady_clock::now());
          if (left.count() <= 0) {
            failure = "step " + std::to_string(step) + ": no report within "
                      + std::to_string(job.step_timeout_ms) + " ms ("
                      + std::to_string(reports.size()) + " of "
                      + std::to_string(num_replicas) + " replicas done)";
            break;
          }
          self->receive(
            [&](done_atom, int64_t s, std::string& report) {
              if (s == step)
                reports.push_back(json::parse(report));
            },
            [&](fail_atom, std::string& what) { failure = what; },
            [&](caf::down_msg& dm) {
              for (size_t d = 0; d < devices.size(); ++d)
                if (dm.source == devices[d].address())
                  failure = "node " + who(static_cast<int>(d))
                            + " went down: " + sys.render(dm.reason);
              for (auto& st : stages)
                for (auto& r : st)
                  if (dm.source == r.handle.address())
                    failure = "replica s" + std::to_string(r.stage) + "r"
                              + std::to_string(r.replica) + " on node "
                              + who(r.device)
                              + " went down: " + sys.render(dm.reason);
            },
            caf::after(left) >> [&] {});
        }
        if (!failure.empty())
          throw std::runtime_error(failure);
        auto t1 = wall_us();
        double wall = (t1 - t0) * 1e-6;
        double loss = 0;
        json links = json::object();
        json reps = json::array();
        for (auto& rep : reports) {
          if (rep["stage"] == P - 1)
            loss += rep["loss"].get<double>();
          for (auto& [k, v] : rep["bytes"].items())
            links[k] = v;
          int s = rep["stage"], r = rep["replica"];
          int d = stages[s][r].device;
          reps.push_back({{"replica", rep["label"]},
                          {"stage", s},
                          {"busy_s", rep["busy_s"]},
                          {"idle_s", std::max(0.0, wall - rep["busy_s"].get<double>())},
                          {"max_unacked", rep["max_unacked"]}});
          if (step < job.trace_steps)
            for (auto& ev : rep["events"])
              trace.events.push_back({ev["name"].get<std::string>(), "compute",
                                      ev["ts"].get<double>() - t_start,
                                      ev["dur"].get<double>(), d,
                                      100 * s + r, {{"step", step}}});
        }
        json rec{{"step", step + 1},
                 {"epoch", epoch},
                 {"loss", loss},
                 {"seconds", wall},
                 {"samples_per_s", B / wall},
                 {"replicas", reps},
                 {"link_bytes", links}};
        metrics.emit("iteration", rec);
        result.iterations.push_back(rec);
        result.last_loss = loss;
        auto elapsed = (t1 - t_start) * 1e-6;
        progress.update("step " + std::to_string(step + 1) + "/"
                          + std::to_string(total_steps),
                        (step + 1) * B, total_steps * B,
                        elapsed > 0 ? (step + 1) * B / elapsed : 0.0, loss);
      }
    }
  } catch (...) {
    progress.finish();
    shutdown();
    throw;
  }
  progress.finish();
  result.steps = step;
  result.seconds = (wall_us() - t_start) * 1e-6;
  result.samples_per_s = result.seconds > 0 ? step * B / result.seconds : 0;
  // -- gather the weights --
  for (int s = 0; s < P; ++s) {
    std::string bytes, err;
    self->request(stages[s][0].handle, milliseconds(job.step_timeout_ms),
                  state_atom::value)
      .receive([&](std::string& b) { bytes = std::move(b); },
               [&](caf::error& e) { err = sys.render(e); });
    if (!err.empty()) {
      shutdown();
      throw std::runtime_error("collecting stage " + std::to_string(s)
                               + " weights: " + err);
    }
    const auto& st = plan.stages[s];
    model->load_range_state(st.first_layer, st.end_layer,
                            serialization::decode_tensors(bytes));
  }
  shutdown();
  result.model = model;
  if (test && job.evaluate)
    result.test = training::evaluate(model, *test, 500, job.test_limit);
  metrics.emit("done", {{"steps", result.steps},
                        {"seconds", result.seconds},
                        {"samples_per_s", result.samples_per_s},
                        {"loss", result.last_loss},
                        {"test_accuracy", result.test.accuracy}});
  if (!job.trace_path.empty())
    planner::write_chrome_trace(trace, job.trace_path);
  return result;
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
