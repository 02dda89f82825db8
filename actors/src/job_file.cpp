#include "asteroid/actors/job.hpp"

#include "asteroid/planner/json_io.hpp"
#include "asteroid/planner/plan_validation.hpp"
#include "asteroid/planner/schedule.hpp"
#include "asteroid/training/loss.hpp"

#include <fstream>
#include <set>
#include <stdexcept>

namespace asteroid::actors {

using nlohmann::json;

// -- job files ------------------------------------------------------------------

namespace {

/// Reads the keys of object `j` into fields; unknown keys are errors.
class object_reader {
public:
  object_reader(const json& j, std::string where, std::set<std::string> known)
    : j_(j), where_(std::move(where)) {
    if (!j.is_object())
      throw std::invalid_argument(where_ + ": expected a JSON object");
    for (auto& [key, value] : j.items())
      if (!known.count(key))
        throw std::invalid_argument(where_ + ": unknown field '" + key + "'");
  }
  template <class T>
  void operator()(const char* key, T& dst) const {
    if (!j_.contains(key))
      return;
    try {
      j_.at(key).get_to(dst);
    } catch (const json::exception& e) {
      throw std::invalid_argument(where_ + ": field '" + key + "': " + e.what());
    }
  }
  std::invalid_argument error(const std::string& what) const {
    return std::invalid_argument(where_ + ": " + what);
  }

private:
  const json& j_;
  std::string where_;
};

fault_tolerance_options parse_fault_tolerance(const json& j,
                                              const std::string& where) {
  fault_tolerance_options o;
  object_reader field{j, where,
                      {"heartbeat_ms", "heartbeat_misses", "snapshot_every",
                       "recovery", "replan_threshold", "checkpoint",
                       "checkpoint_every", "drift_factor", "drift_steps"}};
  field("heartbeat_ms", o.heartbeat_ms);
  field("heartbeat_misses", o.heartbeat_misses);
  field("snapshot_every", o.snapshot_every);
  field("recovery", o.recovery);
  field("replan_threshold", o.replan_threshold);
  field("checkpoint", o.checkpoint_path);
  field("checkpoint_every", o.checkpoint_every);
  field("drift_factor", o.drift_factor);
  field("drift_steps", o.drift_steps);
  if (o.drift_factor != 0 && !(o.drift_factor > 1.0))
    throw field.error("drift_factor must be 0 (off) or > 1");
  if (o.drift_steps < 1)
    throw field.error("drift_steps must be >= 1");
  if (o.heartbeat_ms < 1)
    throw field.error("heartbeat_ms must be >= 1");
  if (o.heartbeat_misses < 1)
    throw field.error("heartbeat_misses must be >= 1");
  if (o.snapshot_every < 0)
    throw field.error("snapshot_every must be >= 0");
  static const std::set<std::string> modes{"replay", "replay_no_rebalance",
                                           "replan", "restart", "none"};
  if (!modes.count(o.recovery))
    throw field.error("recovery '" + o.recovery
                      + "' is not one of replay, replay_no_rebalance, replan, "
                        "restart, none");
  if (!(o.replan_threshold >= 1.0))
    throw field.error("replan_threshold must be >= 1");
  if (o.checkpoint_every < 1)
    throw field.error("checkpoint_every must be >= 1");
  return o;
}

fault_spec parse_fault(const json& j, const std::string& where,
                       size_t num_nodes) {
  fault_spec f;
  object_reader field{j, where, {"step", "delay_ms", "node", "action",
                                 "slowdown", "when"}};
  field("step", f.step);
  field("delay_ms", f.delay_ms);
  field("node", f.node);
  field("action", f.action);
  field("slowdown", f.slowdown);
  field("when", f.when);
  if (f.when != "step" && f.when != "recovery" && f.when != "start")
    throw field.error("when '" + f.when + "' is not one of step, recovery, start");
  static const std::set<std::string> actions{"kill", "stop", "cont", "slow",
                                             "cut", "heal"};
  if (!actions.count(f.action))
    throw field.error("action '" + f.action
                      + "' is not one of kill, stop, cont, slow, cut, heal");
  if (f.node < 0 || static_cast<size_t>(f.node) >= num_nodes)
    throw field.error("node " + std::to_string(f.node) + " is not in 'nodes' ("
                      + std::to_string(num_nodes) + " nodes)");
  if (f.step < 0 || f.delay_ms < 0)
    throw field.error("step and delay_ms must be >= 0");
  if (f.action == "slow" && !(f.slowdown >= 1.0))
    throw field.error("slowdown must be >= 1");
  return f;
}

} // namespace

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
    "connect_timeout_ms", "step_timeout_ms", "profile", "fault_tolerance",
    "faults", "profile_node", "measure_links", "data_plane", "run_ahead",
    "loss"};
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
  field("profile_node", s.profile_node);
  field("measure_links", s.measure_links);
  field("data_plane", s.data_plane);
  field("schedule", s.schedule);
  field("loss", s.loss);
  try {
    training::find_loss(s.loss);
  } catch (const std::exception& e) {
    throw std::invalid_argument(where + ": field 'loss': " + e.what());
  }
  field("credit_window", s.credit_window);
  field("metrics", s.metrics_path);
  field("trace", s.trace_path);
  field("trace_steps", s.trace_steps);
  field("evaluate", s.evaluate);
  field("progress", s.progress);
  field("connect_timeout_ms", s.connect_timeout_ms);
  field("step_timeout_ms", s.step_timeout_ms);
  field("run_ahead", s.run_ahead);
  if (s.profile_node < -1 || s.profile_node >= static_cast<int>(s.nodes.size()))
    throw std::invalid_argument(where + ": field 'profile_node': "
                                + std::to_string(s.profile_node)
                                + " is not -1 (here) or a node index");
  if (j.contains("fault_tolerance"))
    s.fault_tolerance = parse_fault_tolerance(j.at("fault_tolerance"),
                                              where + ": fault_tolerance");
  if (j.contains("faults")) {
    const auto& list = j.at("faults");
    if (!list.is_array())
      throw std::invalid_argument(where + ": field 'faults': expected a list");
    for (size_t i = 0; i < list.size(); ++i)
      s.faults.push_back(parse_fault(list[i], where + ": faults["
                                                + std::to_string(i) + "]",
                                     s.nodes.size()));
  }
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

} // namespace asteroid::actors
