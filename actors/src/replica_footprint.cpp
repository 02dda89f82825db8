// The memory a replica is predicted to hold (replica_footprint.hpp). The
// same parts as the planner's cost model (planner/cost_model.hpp), taken
// from the model's shapes instead of a profile: a node checks what it is
// asked to run without trusting the plan's numbers.
#include "asteroid/actors/replica_footprint.hpp"

#include "asteroid/planner/json_io.hpp"

#include <algorithm>
#include <stdexcept>

namespace asteroid::actors {

namespace {

int64_t numel(const models::shape_t& shape) {
  int64_t n = 1;
  for (auto d : shape)
    n *= d;
  return n;
}

/// Most micro-batches between their forward and their backward pass at any
/// point of the stream.
int max_in_flight(const std::vector<planner::instruction>& stream) {
  int open = 0, most = 0;
  for (const auto& in : stream)
    if (in.kind == planner::op::forward)
      most = std::max(most, ++open);
    else if (in.kind == planner::op::backward)
      --open;
  return most;
}

} // namespace

replica_footprint predict_footprint(const models::sequential_model& stage,
                                    const replica_spec& spec) {
  replica_footprint f;
  const int first = spec.first_layer, end = spec.end_layer;
  int64_t params = 0;
  for (const auto& p : stage->range_parameters(first, end))
    params += static_cast<int64_t>(p.nbytes());
  for (const auto& [name, t] : stage->range_state(first, end))
    f.weights += static_cast<int64_t>(t.nbytes());
  f.gradients = params;
  if (spec.optimizer.kind == training::optimizer_kind::adam)
    f.optimizer = 2 * params;
  else if (spec.optimizer.momentum > 0)
    f.optimizer = params;
  // A GPU replica's snapshot is copied to host memory (serialization::
  // host_copy), not the device memory its budget is for.
  if (spec.snapshot_every > 0 && spec.compute_device.rfind("cuda", 0) != 0)
    f.snapshot_copy = f.weights + f.optimizer;
  f.in_flight = max_in_flight(spec.stream);
  const int64_t rows = spec.shares.at(static_cast<size_t>(spec.replica));
  const int64_t in_element = first == 0 ? static_cast<int64_t>(
                                            c10::elementSize(stage->input_dtype()))
                                        : int64_t{4};
  const int64_t input = numel(stage->input_shape(first)) * in_element;
  int64_t outputs = 0;
  for (int l = first; l < end; ++l)
    outputs += numel(stage->output_shape(l)) * 4;
  const int64_t output = numel(stage->output_shape(end - 1)) * 4;
  const int64_t mb = f.in_flight * rows;
  f.activations = mb * (input + outputs);
  f.link_buffers = mb * ((spec.stage + 1 < spec.num_stages ? output : 0)
                         + (spec.stage > 0 ? input : 0));
  // Pieces from a neighbour's replica are the overlap of its rows and this
  // one's, so never more than this replica's rows. Targets are at most as
  // many elements as the output (classes: one), at most 8 bytes each; a
  // ring all-reduce chunk is a slice of the stage's flattened gradients and
  // buffers. Wire codecs only shrink a tensor, and the encoding adds a
  // header and per-row scales: a 1/16 + 64 KiB margin covers both.
  const bool last = spec.stage + 1 == spec.num_stages;
  int64_t largest = rows * input;
  if (!last)
    largest = std::max(largest, rows * output);
  else
    largest = std::max(largest, rows * std::max<int64_t>(8, 2 * output));
  if (spec.shares.size() > 1)
    largest = std::max(largest, std::max(params, f.weights));
  f.largest_frame = largest + largest / 16 + (int64_t{64} << 10);
  return f;
}

std::string describe(const replica_footprint& f) {
  using planner::format_bytes;
  return format_bytes(f.total()) + " (weights " + format_bytes(f.weights)
         + ", gradients " + format_bytes(f.gradients) + ", optimizer state "
         + format_bytes(f.optimizer) + ", activations "
         + format_bytes(f.activations) + " for " + std::to_string(f.in_flight)
         + " in flight" + ", link buffers "
         + format_bytes(f.link_buffers)
         + (f.snapshot_copy > 0 ? ", or a snapshot's copy of "
                                    + format_bytes(f.snapshot_copy) + " between steps"
                                : std::string())
         + (f.library_workspace > 0
              ? ", GPU library workspace " + format_bytes(f.library_workspace)
              : std::string())
         + ")";
}

void check_budget(const replica_footprint& f, const replica_spec& spec) {
  if (spec.memory_budget < 0 || f.total() + spec.memory_committed <= spec.memory_budget)
    return;
  using planner::format_bytes;
  throw std::invalid_argument(
    "stage " + std::to_string(spec.stage) + " (layers ["
    + std::to_string(spec.first_layer) + ", " + std::to_string(spec.end_layer)
    + "), replica " + std::to_string(spec.replica) + ", " + spec.label
    + ") is predicted to need " + describe(f)
    + (spec.memory_committed > 0
         ? ", on top of " + format_bytes(spec.memory_committed)
             + " for this node's other replicas,"
         : std::string())
    + " but the node's memory budget is " + format_bytes(spec.memory_budget));
}

} // namespace asteroid::actors
