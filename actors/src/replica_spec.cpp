#include "asteroid/actors/replica_spec.hpp"

#include "asteroid/actors/job.hpp" // longest_wait_ms

#include "asteroid/actors/wire_compression.hpp"
#include "asteroid/planner/json_io.hpp"
#include "asteroid/planner/json_reader.hpp"
#include "asteroid/planner/schedule_check.hpp"

#include <limits>
#include <stdexcept>
#include <tuple>

namespace asteroid::actors {

using nlohmann::json;

json to_json(const replica_spec& s) {
  json j{{"model", s.model},
         {"model_options", s.model_options},
         {"stage", s.stage},
         {"num_stages", s.num_stages},
         {"replica", s.replica},
         {"first_layer", s.first_layer},
         {"end_layer", s.end_layer},
         {"batch_size", s.batch_size},
         {"micro_batches", s.micro_batches},
         {"shares", s.shares},
         {"prev_shares", s.prev_shares},
         {"next_shares", s.next_shares},
         {"stream", s.stream},
         {"loss", s.loss},
         {"optimizer",
          {{"kind", training::to_string(s.optimizer.kind)},
           {"lr", s.optimizer.lr},
           {"momentum", s.optimizer.momentum},
           {"weight_decay", s.optimizer.weight_decay}}},
         {"credit_window", s.credit_window},
         {"slowdown", s.slowdown},
         {"label", s.label},
         {"recv_timeout_ms", s.recv_timeout_ms},
         {"report_after_ms", s.report_after_ms},
         {"trace_steps", s.trace_steps},
         {"generation", s.generation},
         {"job", s.job},
         {"snapshot_every", s.snapshot_every},
         {"memory_budget", s.memory_budget},
         {"memory_committed", s.memory_committed},
         {"compute_device", s.compute_device},
         {"activation_codec", s.activation_codec},
         {"gradient_codec", s.gradient_codec},
         {"error_feedback", s.error_feedback},
         {"all_reduce_codec", s.all_reduce_codec},
         {"plain_prev", s.plain_prev},
         {"plain_next", s.plain_next}};
  if (s.emulated_compute)
    j["emulated_compute"] = *s.emulated_compute;
  return j;
}

namespace {

using planner::json_field;
using planner::read_optional;
using planner::read_required;

replica_spec read_spec(const json& j) {
  json_field f{"replica spec", ""};
  // "restore_version", "state_upload": the supervisor's word to its node
  // (where the state comes from), left in the spec.
  planner::check_keys(j, f,
                      {"model", "model_options", "stage", "num_stages",
                       "replica", "first_layer", "end_layer", "batch_size",
                       "micro_batches", "shares", "prev_shares", "next_shares",
                       "stream", "loss", "optimizer", "credit_window",
                       "slowdown", "label", "recv_timeout_ms", "report_after_ms", "trace_steps",
                       "generation",
                       "job", "snapshot_every", "restore_version",
                       "state_upload", "memory_budget", "memory_committed", "compute_device",
                       "activation_codec",
                       "gradient_codec", "error_feedback", "all_reduce_codec",
                       "plain_prev", "plain_next", "emulated_compute"});
  replica_spec s;
  read_required(j, f, "model", s.model);
  s.model_options = planner::member(j, f, "model_options");
  if (!s.model_options.is_object())
    f["model_options"].fail(std::string("expected an object, got ")
                            + s.model_options.type_name());
  read_required(j, f, "stage", s.stage);
  read_required(j, f, "num_stages", s.num_stages);
  read_required(j, f, "replica", s.replica);
  read_required(j, f, "first_layer", s.first_layer);
  read_required(j, f, "end_layer", s.end_layer);
  read_required(j, f, "batch_size", s.batch_size);
  read_required(j, f, "micro_batches", s.micro_batches);
  read_required(j, f, "shares", s.shares);
  read_required(j, f, "prev_shares", s.prev_shares);
  read_required(j, f, "next_shares", s.next_shares);
  s.stream = planner::parse_instructions(planner::member(j, f, "stream"),
                                         "replica spec: stream");
  read_required(j, f, "loss", s.loss);
  const auto& o = planner::member(j, f, "optimizer");
  auto of = f["optimizer"];
  planner::check_keys(o, of, {"kind", "lr", "momentum", "weight_decay"});
  std::string kind;
  read_required(o, of, "kind", kind);
  try {
    s.optimizer.kind = training::parse_optimizer(kind);
  } catch (const std::exception& e) {
    of["kind"].fail(e.what());
  }
  read_required(o, of, "lr", s.optimizer.lr);
  read_required(o, of, "momentum", s.optimizer.momentum);
  read_required(o, of, "weight_decay", s.optimizer.weight_decay);
  read_required(j, f, "credit_window", s.credit_window);
  read_required(j, f, "slowdown", s.slowdown);
  read_required(j, f, "label", s.label);
  read_required(j, f, "recv_timeout_ms", s.recv_timeout_ms);
  read_optional(j, f, "report_after_ms", s.report_after_ms);
  if (s.report_after_ms < 0 || s.report_after_ms > longest_wait_ms)
    f["report_after_ms"].fail("must be in [0, " + std::to_string(longest_wait_ms) + "] ms");
  read_optional(j, f, "trace_steps", s.trace_steps);
  if (s.trace_steps < -1)
    f["trace_steps"].fail("must be -1 (every step) or a count of steps");
  read_optional(j, f, "generation", s.generation);
  read_optional(j, f, "job", s.job);
  read_optional(j, f, "snapshot_every", s.snapshot_every);
  read_optional(j, f, "memory_budget", s.memory_budget);
  read_optional(j, f, "memory_committed", s.memory_committed);
  read_optional(j, f, "compute_device", s.compute_device);
  read_optional(j, f, "activation_codec", s.activation_codec);
  read_optional(j, f, "gradient_codec", s.gradient_codec);
  read_optional(j, f, "error_feedback", s.error_feedback);
  read_optional(j, f, "all_reduce_codec", s.all_reduce_codec);
  if (const auto* c = planner::optional_member(j, "emulated_compute"))
    s.emulated_compute = planner::parse_layer_profile(*c, f["emulated_compute"]);
  for (auto [key, dst] : {std::pair{"plain_prev", &s.plain_prev},
                          std::pair{"plain_next", &s.plain_next}}) {
    if (!planner::optional_member(j, key))
      continue;
    std::vector<int64_t> indices;
    read_required(j, f, key, indices);
    for (auto q : indices) {
      if (q < 0 || q > std::numeric_limits<int>::max())
        f[key].fail("replica " + std::to_string(q) + " out of range");
      dst->push_back(static_cast<int>(q));
    }
  }
  return s;
}

void check_spec(const replica_spec& s) {
  if (s.snapshot_every < 0)
    throw std::invalid_argument("snapshot_every must be >= 0");
  if (s.num_stages < 1 || s.stage < 0 || s.stage >= s.num_stages)
    throw std::invalid_argument("stage " + std::to_string(s.stage)
                                + " out of range");
  if (s.replica < 0 || s.replica >= static_cast<int>(s.shares.size()))
    throw std::invalid_argument("replica " + std::to_string(s.replica)
                                + " out of range");
  if (s.micro_batches < 1 || s.batch_size < s.micro_batches)
    throw std::invalid_argument("bad batch size / micro-batch count");
  if ((s.stage > 0) == s.prev_shares.empty()
      || (s.stage + 1 < s.num_stages) == s.next_shares.empty())
    throw std::invalid_argument("neighbour shares do not match the stage");
  if (s.credit_window < 1)
    throw std::invalid_argument("credit_window must be >= 1");
  if (!(s.slowdown >= 1.0))
    throw std::invalid_argument("slowdown must be >= 1");
  check_wire_compression(s.activation_codec, s.gradient_codec, s.error_feedback,
                         s.all_reduce_codec);
  for (auto [name, plain, n] : {std::tuple{"plain_prev", &s.plain_prev, s.prev_shares.size()},
                                std::tuple{"plain_next", &s.plain_next, s.next_shares.size()}})
    for (int q : *plain)
      if (q < 0 || static_cast<size_t>(q) >= n)
        throw std::invalid_argument(std::string(name) + ": replica " + std::to_string(q)
                                    + " out of range (the neighbouring stage has "
                                    + std::to_string(n) + ")");
  // A stream from a peer is executed as it comes: it must not be able to
  // make the replica index past its micro-batches or talk to a stage that
  // is not its neighbour.
  planner::check_stream({s.stage, s.replica, -1, s.stream}, s.num_stages,
                        s.micro_batches);
}

} // namespace

replica_spec replica_spec_from_json(const json& j) {
  try {
    auto s = read_spec(j);
    check_spec(s);
    return s;
  } catch (const planner::json_error& e) {
    throw std::invalid_argument(e.what()); // names "replica spec" already
  } catch (const std::exception& e) {
    throw std::invalid_argument(std::string("replica spec: ") + e.what());
  }
}

} // namespace asteroid::actors
