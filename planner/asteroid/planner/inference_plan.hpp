#pragma once
/// \file
/// A pipeline for inference (EdgePipe): each stage is a layer range on one
/// device, requests of `micro_batch` samples stream through the stages, and
/// the throughput is set by the slowest stage's compute or outgoing transfer.

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "asteroid/planner/cluster.hpp"
#include "asteroid/planner/model_profile.hpp"

namespace asteroid::planner {

/// How requests flow and what a stage keeps, for planning and evaluation.
struct inference_options {
  /// Samples per request (the micro-batch every stage computes at once).
  int64_t micro_batch = 8;
  /// Requests a stage may hold in its receive queue and in its send queue
  /// each: what its memory reserves besides the weights.
  int queue_depth = 2;
};

struct inference_stage {
  int first_layer = 0;
  int end_layer = 0;
  /// The cluster device that runs the stage.
  int device = 0;
  /// Predictions (filled by evaluate_inference): seconds of compute per
  /// request, seconds to send its output to the next stage (0 for the
  /// last), and the bytes the device needs.
  double compute_s = 0.0;
  double send_s = 0.0;
  int64_t memory_bytes = 0;
};

struct inference_plan {
  /// "edgepipe", "exhaustive", "straight" or "on-device".
  std::string planner;
  int64_t micro_batch = 0;
  std::vector<inference_stage> stages;
  /// The slowest stage's compute or send time: one request leaves the
  /// pipeline every `bottleneck_s` in steady state.
  double bottleneck_s = 0.0;
  double samples_per_s = 0.0;
  /// One request's time through every stage and link, without queueing.
  double latency_s = 0.0;

  int num_stages() const { return static_cast<int>(stages.size()); }
};

/// What a stage of layers [first, end) needs on a device: the weights (and
/// buffers), `queue_depth` requests in its receive queue (its input) and in
/// its send queue (its output), and the largest working memory of one of
/// its layers for one request.
int64_t inference_memory_bytes(const model_profile& profile, int first, int end,
                               const inference_options& options);

/// Fills every stage's predictions and the plan's bottleneck, samples/s and
/// latency. Compute is the profiled forward time over the device's speed,
/// times `co_location_slowdown` when the plan uses more than one device; a
/// send is the stage's output for one request over the link to the next
/// stage's device (bytes / bandwidth + latency). The first stage's input
/// and the last stage's output stay on their devices (the caller shares
/// them). Throws planner_error naming the stage for a range that does not
/// tile the model, a device outside the cluster or used twice.
void evaluate_inference(inference_plan& plan, const model_profile& profile,
                        const cluster& c, const inference_options& options);

/// True when every stage's memory is within its device's budget.
bool inference_fits_memory(const inference_plan& plan, const cluster& c);

void to_json(nlohmann::json& j, const inference_stage& s);
void to_json(nlohmann::json& j, const inference_plan& p);

} // namespace asteroid::planner
