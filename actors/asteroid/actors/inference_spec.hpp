#pragma once
/// \file
/// What a device needs to host one stage of an inference pipeline
/// (EdgePipe): its layers, where it sits in the pipeline and how many
/// requests it may hold. The server fills it and ships it as JSON with the
/// stage's weights (`ast_serve`).
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace asteroid::actors {

struct inference_spec {
  std::string model;             ///< name for training::build_model
  nlohmann::json model_options;  ///< the model's options (as in training)
  int stage = 0;
  int num_stages = 1;
  int first_layer = 0;
  int end_layer = 0;
  /// Samples per request: every request is one micro-batch of at most this
  /// many rows.
  int64_t micro_batch = 1;
  /// Requests the stage may hold in its receive queue; one more is refused
  /// (the server never has more than this many in flight in the pipeline).
  int queue_limit = 4;
  /// How the stage's output crosses the link to the next stage
  /// (kernels::wire_codec names; "none" is bit-exact). The last stage's
  /// output goes back to the server uncompressed.
  std::string activation_codec = "none";
  /// How the previous stage's output arrives: its `activation_codec` (each
  /// link may carry its own). The first stage's input comes from the server
  /// as the request's tensor.
  std::string input_codec = "none";
  /// Emulated slowdown: compute is padded to this factor × measured time.
  double slowdown = 1.0;
  /// The job (the node's claim) it serves: tensors of any other are dropped.
  int64_t job = 0;
  /// The server's pipeline it belongs to (bumped by every recovery): it
  /// drops tensors of another and stamps its outputs with it.
  int64_t generation = 1;
  /// Name for logs and stats ("s1@node2").
  std::string label;
  /// The node's memory budget in bytes (< 0: none), set by the device that
  /// builds the stage from its own budget, whatever the server sent.
  int64_t memory_budget = -1;
  /// Where the stage computes ("cpu", "cuda:N"), likewise set by the device
  /// from its own `--device`.
  std::string compute_device = "cpu";
};

nlohmann::json to_json(const inference_spec& spec);
/// Reads and checks a spec; throws std::invalid_argument starting
/// "inference spec: " and naming the problem.
inference_spec inference_spec_from_json(const nlohmann::json& j);

} // namespace asteroid::actors
