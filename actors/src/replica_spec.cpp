#include "asteroid/actors/replica_spec.hpp"

#include "asteroid/planner/json_io.hpp"
#include "asteroid/planner/schedule_check.hpp"

#include <stdexcept>

namespace asteroid::actors {

using nlohmann::json;

json to_json(const replica_spec& s) {
  return json{{"model", s.model},
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
              {"generation", s.generation},
              {"snapshot_every", s.snapshot_every}};
}

namespace {

replica_spec read_spec(const json& j) {
  replica_spec s;
  j.at("model").get_to(s.model);
  s.model_options = j.at("model_options");
  j.at("stage").get_to(s.stage);
  j.at("num_stages").get_to(s.num_stages);
  j.at("replica").get_to(s.replica);
  j.at("first_layer").get_to(s.first_layer);
  j.at("end_layer").get_to(s.end_layer);
  j.at("batch_size").get_to(s.batch_size);
  j.at("micro_batches").get_to(s.micro_batches);
  j.at("shares").get_to(s.shares);
  j.at("prev_shares").get_to(s.prev_shares);
  j.at("next_shares").get_to(s.next_shares);
  s.stream = planner::parse_instructions(j.at("stream"), "stream");
  j.at("loss").get_to(s.loss);
  const auto& o = j.at("optimizer");
  s.optimizer.kind = training::parse_optimizer(o.at("kind").get<std::string>());
  o.at("lr").get_to(s.optimizer.lr);
  o.at("momentum").get_to(s.optimizer.momentum);
  o.at("weight_decay").get_to(s.optimizer.weight_decay);
  j.at("credit_window").get_to(s.credit_window);
  j.at("slowdown").get_to(s.slowdown);
  j.at("label").get_to(s.label);
  j.at("recv_timeout_ms").get_to(s.recv_timeout_ms);
  s.generation = j.value("generation", 0);
  s.snapshot_every = j.value("snapshot_every", int64_t{0});
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
  } catch (const std::exception& e) {
    throw std::invalid_argument(std::string("replica spec: ") + e.what());
  }
}

} // namespace asteroid::actors
