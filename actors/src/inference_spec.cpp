#include "asteroid/actors/inference_spec.hpp"

#include "asteroid/kernels/wire_codec.hpp"
#include "asteroid/planner/json_reader.hpp"

#include <stdexcept>

namespace asteroid::actors {

using nlohmann::json;

json to_json(const inference_spec& s) {
  return json{{"model", s.model},
              {"model_options", s.model_options},
              {"stage", s.stage},
              {"num_stages", s.num_stages},
              {"first_layer", s.first_layer},
              {"end_layer", s.end_layer},
              {"micro_batch", s.micro_batch},
              {"queue_limit", s.queue_limit},
              {"activation_codec", s.activation_codec},
              {"input_codec", s.input_codec},
              {"slowdown", s.slowdown},
              {"job", s.job},
              {"generation", s.generation},
              {"label", s.label},
              {"memory_budget", s.memory_budget},
              {"compute_device", s.compute_device}};
}

namespace {

using planner::json_field;
using planner::read_optional;
using planner::read_required;

inference_spec read_inference_spec(const json& j) {
  json_field f{"inference spec", ""};
  planner::check_keys(j, f,
                      {"model", "model_options", "stage", "num_stages",
                       "first_layer", "end_layer", "micro_batch", "queue_limit",
                       "activation_codec", "input_codec", "slowdown", "job", "generation",
                       "label", "memory_budget", "compute_device",
                       // where the node takes the weights from, left in the spec
                       "state_upload"});
  inference_spec s;
  read_required(j, f, "model", s.model);
  s.model_options = planner::member(j, f, "model_options");
  if (!s.model_options.is_object())
    f["model_options"].fail(std::string("expected an object, got ")
                            + s.model_options.type_name());
  read_required(j, f, "stage", s.stage);
  read_required(j, f, "num_stages", s.num_stages);
  read_required(j, f, "first_layer", s.first_layer);
  read_required(j, f, "end_layer", s.end_layer);
  read_required(j, f, "micro_batch", s.micro_batch);
  read_required(j, f, "queue_limit", s.queue_limit);
  read_required(j, f, "job", s.job);
  read_optional(j, f, "generation", s.generation);
  read_optional(j, f, "activation_codec", s.activation_codec);
  read_optional(j, f, "input_codec", s.input_codec);
  read_optional(j, f, "compute_device", s.compute_device);
  read_optional(j, f, "slowdown", s.slowdown);
  read_optional(j, f, "label", s.label);
  read_optional(j, f, "memory_budget", s.memory_budget);
  return s;
}

void check_inference_spec(const inference_spec& s) {
  if (s.num_stages < 1 || s.stage < 0 || s.stage >= s.num_stages)
    throw std::invalid_argument("stage " + std::to_string(s.stage)
                                + " out of range");
  if (s.first_layer < 0 || s.first_layer >= s.end_layer)
    throw std::invalid_argument("layers [" + std::to_string(s.first_layer) + ", "
                                + std::to_string(s.end_layer)
                                + ") are not a range of layers");
  if (s.micro_batch < 1)
    throw std::invalid_argument("micro_batch must be >= 1");
  if (s.queue_limit < 1)
    throw std::invalid_argument("queue_limit must be >= 1");
  if (!(s.slowdown >= 1.0))
    throw std::invalid_argument("slowdown must be >= 1");
  if (s.job <= 0)
    throw std::invalid_argument("job must be > 0");
  kernels::parse_wire_codec(s.activation_codec); // names the codec it rejects
  kernels::parse_wire_codec(s.input_codec);
}

} // namespace

inference_spec inference_spec_from_json(const json& j) {
  try {
    auto s = read_inference_spec(j);
    check_inference_spec(s);
    return s;
  } catch (const planner::json_error& e) {
    throw std::invalid_argument(e.what()); // names "inference spec" already
  } catch (const std::exception& e) {
    throw std::invalid_argument(std::string("inference spec: ") + e.what());
  }
}

} // namespace asteroid::actors
