#include "asteroid/actors/job.hpp"
#include "asteroid/actors/node_capabilities.hpp"

#include "asteroid/planner/json_io.hpp"
#include "asteroid/planner/json_reader.hpp"
#include "asteroid/planner/plan_validation.hpp"
#include "asteroid/planner/schedule.hpp"
#include "asteroid/training/loss.hpp"
#include "asteroid/training/model_options_json.hpp"

#include <fstream>
#include <limits>
#include <set>
#include <stdexcept>

namespace asteroid::actors {

using nlohmann::json;

// -- job files ------------------------------------------------------------------

namespace {

using planner::json_field;
using planner::read_optional;

fault_tolerance_options parse_fault_tolerance(const json& j,
                                              const json_field& f) {
  fault_tolerance_options o;
  planner::check_keys(j, f,
                      {"heartbeat_ms", "heartbeat_misses", "snapshot_every",
                       "recovery", "replan_threshold", "checkpoint",
                       "checkpoint_every", "drift_factor", "drift_steps",
                       "memory_replan"});
  read_optional(j, f, "heartbeat_ms", o.heartbeat_ms);
  read_optional(j, f, "heartbeat_misses", o.heartbeat_misses);
  read_optional(j, f, "snapshot_every", o.snapshot_every);
  read_optional(j, f, "recovery", o.recovery);
  read_optional(j, f, "replan_threshold", o.replan_threshold);
  read_optional(j, f, "checkpoint", o.checkpoint_path);
  read_optional(j, f, "checkpoint_every", o.checkpoint_every);
  read_optional(j, f, "drift_factor", o.drift_factor);
  read_optional(j, f, "drift_steps", o.drift_steps);
  read_optional(j, f, "memory_replan", o.memory_replan);
  if (o.drift_factor != 0 && !(o.drift_factor > 1.0))
    f["drift_factor"].fail("must be 0 (off) or > 1");
  if (o.drift_steps < 1)
    f["drift_steps"].fail("must be >= 1");
  if (o.heartbeat_ms < 1 || o.heartbeat_ms > longest_wait_ms)
    f["heartbeat_ms"].fail("must be in [1, " + std::to_string(longest_wait_ms) + "], got "
                           + std::to_string(o.heartbeat_ms));
  if (o.heartbeat_misses < 1 || o.heartbeat_ms * o.heartbeat_misses > longest_wait_ms)
    f["heartbeat_misses"].fail("must be >= 1, and heartbeat_ms x heartbeat_misses at most "
                               + std::to_string(longest_wait_ms) + " ms");
  if (o.snapshot_every < 0)
    f["snapshot_every"].fail("must be >= 0");
  static const std::set<std::string> modes{"replay", "replay_no_rebalance",
                                           "replan", "restart", "none"};
  if (!modes.count(o.recovery))
    f["recovery"].fail("recovery '" + o.recovery
                       + "' is not one of replay, replay_no_rebalance, replan, "
                         "restart, none");
  if (!(o.replan_threshold >= 1.0))
    f["replan_threshold"].fail("must be >= 1");
  if (o.checkpoint_every < 1)
    f["checkpoint_every"].fail("must be >= 1");
  return o;
}

fault_spec parse_fault(const json& j, const json_field& f, size_t num_nodes) {
  fault_spec fs;
  planner::check_keys(j, f, {"step", "delay_ms", "node", "action", "slowdown",
                             "bytes", "when"});
  read_optional(j, f, "step", fs.step);
  read_optional(j, f, "delay_ms", fs.delay_ms);
  read_optional(j, f, "node", fs.node);
  read_optional(j, f, "action", fs.action);
  read_optional(j, f, "slowdown", fs.slowdown);
  read_optional(j, f, "when", fs.when);
  if (j.contains("bytes"))
    fs.bytes = planner::parse_memory_size(j.at("bytes"),
                                          f["bytes"].where + ": " + f["bytes"].path);
  if (fs.when != "step" && fs.when != "recovery" && fs.when != "start")
    f["when"].fail("when '" + fs.when + "' is not one of step, recovery, start");
  static const std::set<std::string> actions{"kill", "stop", "cont", "slow",
                                             "cut", "heal", "reset", "hog"};
  if (!actions.count(fs.action))
    f["action"].fail("action '" + fs.action
                     + "' is not one of kill, stop, cont, slow, cut, heal, reset, hog");
  if (fs.node < 0 || static_cast<size_t>(fs.node) >= num_nodes)
    f["node"].fail("node " + std::to_string(fs.node) + " is not in 'nodes' ("
                   + std::to_string(num_nodes) + " nodes)");
  if (fs.step < 0 || fs.delay_ms < 0 || fs.delay_ms > longest_wait_ms)
    f.fail("step must be >= 0 and delay_ms in [0, " + std::to_string(longest_wait_ms) + "]");
  if (fs.action == "slow" && !(fs.slowdown >= 1.0))
    f["slowdown"].fail("must be >= 1");
  if (fs.action == "hog" && fs.bytes <= 0)
    f["bytes"].fail("a hog needs bytes > 0 (a memory size, e.g. \"512MiB\")");
  return fs;
}

/// What each number of a job may be; fails naming the field.
void check_ranges(const job_spec& s, const json_field& f) {
  auto at_least = [&](const char* key, int64_t v, int64_t lo) {
    if (v < lo)
      f[key].fail("must be >= " + std::to_string(lo) + ", got " + std::to_string(v));
  };
  // (The reader refuses NaN and infinities already.)
  const auto& o = s.optimizer;
  // The optimizer works in 32-bit floats: a larger factor fails on a node,
  // at its first step, naming no field.
  const double float_max = std::numeric_limits<float>::max();
  const auto got = [](double v) { return ", got " + json(v).dump(); };
  if (!(o.lr > 0 && o.lr <= float_max))
    f["lr"].fail("must be > 0 and at most 3.4e38 (32-bit floats)" + got(o.lr));
  if (!(o.momentum >= 0 && o.momentum < 1))
    f["momentum"].fail("must be in [0, 1)");
  if (!(o.weight_decay >= 0 && o.weight_decay <= float_max))
    f["weight_decay"].fail("must be >= 0 and at most 3.4e38 (32-bit floats)"
                           + got(o.weight_decay));
  at_least("epochs", s.epochs, 1);
  if (s.max_steps < -1)
    f["max_steps"].fail("must be -1 (every epoch) or a step count >= 0, got "
                        + std::to_string(s.max_steps));
  at_least("credit_window", s.credit_window, 0);
  at_least("train_limit", s.train_limit, 0);
  at_least("test_limit", s.test_limit, 0);
  at_least("synthetic_count", s.synthetic_count, 1);
  at_least("trace_steps", s.trace_steps, 0);
  auto wait = [&](const char* key, int64_t v) {
    if (v < 1 || v > longest_wait_ms)
      f[key].fail("must be in [1, " + std::to_string(longest_wait_ms) + "] ms, got "
                  + std::to_string(v));
  };
  wait("connect_timeout_ms", s.connect_timeout_ms);
  wait("step_timeout_ms", s.step_timeout_ms);
  if (s.micro_batch_report_ms < 0 || s.micro_batch_report_ms > longest_wait_ms)
    f["micro_batch_report_ms"].fail("must be in [0, " + std::to_string(longest_wait_ms)
                                    + "] ms, got " + std::to_string(s.micro_batch_report_ms));
}

} // namespace

bool known_compute_time(const std::string& value) {
  return value == "measured" || value == "profile";
}

job_spec parse_job(const json& j, const std::string& where) {
  job_spec s;
  json_field f{where, ""};
  planner::check_keys(
    j, f,
    {"model", "model_options", "dataset", "data_dir", "train_limit",
     "test_limit", "synthetic_count", "batch_size", "micro_batches",
     "optimizer", "lr", "momentum", "weight_decay", "epochs", "max_steps",
     "seed", "nodes", "plan", "planner", "schedule", "credit_window",
     "metrics", "trace", "trace_steps", "evaluate", "progress",
     "connect_timeout_ms", "step_timeout_ms", "profile", "fault_tolerance",
     "faults", "profile_node", "measure_links", "full_duplex_links", "speeds", "compute_time", "data_plane", "run_ahead",
     "micro_batch_actors", "micro_batch_report_ms", "loss", "credentials", "compression", "check_replicas"});
  read_optional(j, f, "model", s.model);
  if (auto* x = planner::optional_member(j, "model_options")) {
    if (!x->is_object())
      f["model_options"].fail(std::string("expected an object, got ")
                              + x->type_name());
    try { // a typo ("num_clases") would otherwise pass silently
      training::model_options_from_json(*x);
    } catch (const std::exception& e) {
      f["model_options"].fail(e.what());
    }
    s.model_options = *x;
  }
  read_optional(j, f, "dataset", s.dataset);
  read_optional(j, f, "data_dir", s.data_dir);
  read_optional(j, f, "train_limit", s.train_limit);
  read_optional(j, f, "test_limit", s.test_limit);
  read_optional(j, f, "synthetic_count", s.synthetic_count);
  read_optional(j, f, "batch_size", s.batch_size);
  read_optional(j, f, "micro_batches", s.micro_batches);
  std::string opt = "sgd";
  read_optional(j, f, "optimizer", opt);
  try {
    s.optimizer.kind = training::parse_optimizer(opt);
  } catch (const std::exception& e) {
    f["optimizer"].fail(e.what());
  }
  read_optional(j, f, "lr", s.optimizer.lr);
  read_optional(j, f, "momentum", s.optimizer.momentum);
  read_optional(j, f, "weight_decay", s.optimizer.weight_decay);
  read_optional(j, f, "epochs", s.epochs);
  read_optional(j, f, "max_steps", s.max_steps);
  read_optional(j, f, "seed", s.seed);
  read_optional(j, f, "nodes", s.nodes);
  read_optional(j, f, "credentials", s.credentials);
  read_optional(j, f, "planner", s.planner);
  read_optional(j, f, "profile", s.profile_path);
  read_optional(j, f, "profile_node", s.profile_node);
  read_optional(j, f, "measure_links", s.measure_links);
  read_optional(j, f, "full_duplex_links", s.full_duplex_links);
  read_optional(j, f, "speeds", s.speeds);
  if (!known_speeds(s.speeds))
    f["speeds"].fail("'" + s.speeds + "' (expected auto, reported or measured)");
  read_optional(j, f, "compute_time", s.compute_time);
  if (!known_compute_time(s.compute_time))
    f["compute_time"].fail("'" + s.compute_time + "' (expected measured or profile)");
  read_optional(j, f, "data_plane", s.data_plane);
  read_optional(j, f, "schedule", s.schedule);
  read_optional(j, f, "loss", s.loss);
  try {
    training::find_loss(s.loss);
  } catch (const std::exception& e) {
    f["loss"].fail(e.what());
  }
  read_optional(j, f, "credit_window", s.credit_window);
  read_optional(j, f, "metrics", s.metrics_path);
  read_optional(j, f, "trace", s.trace_path);
  read_optional(j, f, "trace_steps", s.trace_steps);
  read_optional(j, f, "evaluate", s.evaluate);
  read_optional(j, f, "progress", s.progress);
  read_optional(j, f, "connect_timeout_ms", s.connect_timeout_ms);
  read_optional(j, f, "step_timeout_ms", s.step_timeout_ms);
  read_optional(j, f, "run_ahead", s.run_ahead);
  read_optional(j, f, "micro_batch_actors", s.micro_batch_actors);
  read_optional(j, f, "micro_batch_report_ms", s.micro_batch_report_ms);
  read_optional(j, f, "check_replicas", s.check_replicas);
  if (auto* x = planner::optional_member(j, "compression")) {
    auto cf = f["compression"];
    planner::check_keys(*x, cf,
                        {"activations", "gradients", "error_feedback", "all_reduce",
                         "below_mbps"});
    read_optional(*x, cf, "activations", s.compression.activations);
    read_optional(*x, cf, "gradients", s.compression.gradients);
    read_optional(*x, cf, "error_feedback", s.compression.error_feedback);
    read_optional(*x, cf, "all_reduce", s.compression.all_reduce);
    read_optional(*x, cf, "below_mbps", s.compression.below_mbps);
    if (!(s.compression.below_mbps >= 0.0))
      cf["below_mbps"].fail("expected a link rate in Mbit/s (0: compress every link), got "
                            + planner::member(*x, cf, "below_mbps").dump());
    try {
      check_wire_compression(s.compression.activations, s.compression.gradients,
                             s.compression.error_feedback, s.compression.all_reduce);
    } catch (const std::exception& e) {
      cf.fail(e.what());
    }
  }
  if (s.profile_node < -1 || s.profile_node >= static_cast<int>(s.nodes.size()))
    f["profile_node"].fail(std::to_string(s.profile_node)
                           + " is not -1 (here) or a node index");
  if (auto* x = planner::optional_member(j, "fault_tolerance"))
    s.fault_tolerance = parse_fault_tolerance(*x, f["fault_tolerance"]);
  if (auto* x = planner::optional_member(j, "faults")) {
    const auto& list = planner::get_array(*x, f["faults"]);
    for (size_t i = 0; i < list.size(); ++i)
      s.faults.push_back(parse_fault(list[i], f["faults"][i], s.nodes.size()));
  }
  if (auto* p = planner::optional_member(j, "plan")) {
    if (p->is_string()) {
      try { // the plan file's own errors, said where they came from
        s.plan = planner::load_plan_file(p->get<std::string>());
      } catch (const std::exception& e) {
        f["plan"].fail(std::string("plan file ") + e.what());
      }
    } else {
      s.plan = planner::parse_plan(*p, where + ": plan");
    }
  }
  if (!s.plan && s.planner.empty())
    f.fail("give a 'plan' or \"planner\": \"asteroid\"");
  if (s.nodes.empty())
    f["nodes"].fail("is empty");
  for (size_t i = 0; i < s.nodes.size(); ++i)
    try {
      parse_endpoint(s.nodes[i]);
    } catch (const std::exception& e) {
      f["nodes"][i].fail(e.what());
    }
  if (s.batch_size < 1 || s.micro_batches < 1
      || s.batch_size % s.micro_batches != 0)
    f["batch_size"].fail("must be a positive multiple of micro_batches");
  check_ranges(s, f);
  try {
    planner::parse_schedule_kind(s.schedule);
  } catch (const std::exception& e) {
    f["schedule"].fail(e.what());
  }
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

} // namespace asteroid::actors
