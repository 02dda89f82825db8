#pragma once
/// \file
/// Serving a model from a handful of nodes (`asteroid serve --config`): a
/// serve file names the model and its weights (a checkpoint of this
/// project, or seeded initialisation), the nodes, how the pipeline is
/// planned and which inputs to send; run_serve starts a server
/// (server.hpp) on the nodes, streams the inputs through it as requests and
/// reports throughput, latency and what every stage did.
///
/// Serve file (JSON; every key optional; `asteroid cluster --serve` fills
/// "nodes" and "credentials"):
///
///     {"model": "cnn", "model_options": {}, "checkpoint": "job.ckpt",
///      "seed": 1, "nodes": ["127.0.0.1:27000", ...], "credentials": "DIR",
///      "planner": "edgepipe", "profile": "cnn.profile.json",
///      "measure_links": true,
///      "plan": {"stages": [{"first_layer": 0, "end_layer": 2, "device": 0}, ...]},
///      "micro_batch": 8, "max_in_flight": 0, "activation_codec": "none",
///      "compress_below_mbps": 0,
///      "data_plane": true, "dataset": "fashion-mnist", "data_dir": "",
///      "requests": 100, "metrics": "serve.jsonl", "trace": "serve.json",
///      "outputs": "outputs.jsonl", "connect_timeout_ms": 3000,
///      "request_timeout_ms": 60000, "recover": true, "heartbeat_ms": 500,
///      "heartbeat_misses": 6}
#include "asteroid/actors/protocol.hpp"
#include "asteroid/models/sequential_model.hpp"
#include "asteroid/planner/inference_plan.hpp"
#include "asteroid/planner/model_profile.hpp"

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace asteroid::actors {

struct serve_spec {
  std::string model = "cnn";
  nlohmann::json model_options = nlohmann::json::object();
  /// A checkpoint of this project (an `asteroid job` checkpoint or an
  /// `asteroid train` one): the weights served, and the model they belong
  /// to. Empty: the model initialised from `seed`.
  std::string checkpoint;
  uint64_t seed = 1;
  std::vector<std::string> nodes;
  std::string credentials;
  /// "edgepipe", "straight" or "on-device" (ignored with `plan`).
  std::string planner = "edgepipe";
  std::string profile_path;
  /// The profile itself (library callers; run_serve(spec) takes one before
  /// it starts its actor system when neither this, a file nor stages are
  /// given).
  std::optional<planner::model_profile> profile;
  /// When the planner places the stages over more than one node (or
  /// `compress_below_mbps` picks which links compress): measure every link
  /// between the nodes first (remote_probe.hpp), on the path the stages'
  /// tensors take, and plan with them; false: every link counts as 1 Gbit/s.
  bool measure_links = true;
  /// Stages given by the caller (first_layer, end_layer, device each).
  std::optional<planner::inference_plan> plan;
  int64_t micro_batch = 8;
  int max_in_flight = 0;
  std::string activation_codec = "none";
  /// > 0: only links measured slower than this many Mbit/s carry
  /// `activation_codec` (server_options); links are then measured even when
  /// the stages are given.
  double compress_below_mbps = 0;
  bool data_plane = true;
  /// Where the requests' inputs come from: "fashion-mnist" or "cifar10"
  /// (test split, with labels: the result has their accuracy), or
  /// "synthetic" (random inputs of the model's input shape, from `seed`).
  std::string dataset = "fashion-mnist";
  std::string data_dir;
  /// Requests sent (each `micro_batch` samples; the dataset is cycled).
  int64_t requests = 100;
  /// JSON lines: the plan, one line per request (id, rows, latency), and a
  /// summary with every stage's busy time and queue depth ("-": stdout).
  std::string metrics_path;
  /// Chrome trace of the first requests on every stage.
  std::string trace_path;
  /// JSON lines, one per request in order: its id and each row's top class.
  std::string outputs_path;
  int64_t connect_timeout_ms = 3000;
  int64_t request_timeout_ms = 60000;
  /// Re-plan on the nodes left when one is lost, and send the requests in
  /// flight again (server.hpp); false: a loss fails what is not answered.
  bool recover = true;
  /// The server's heartbeats (server_options).
  int64_t heartbeat_ms = 500;
  int heartbeat_misses = 6;
};

/// Reads a serve file's JSON; throws std::invalid_argument starting with
/// `where` and naming the field at fault.
serve_spec parse_serve(const nlohmann::json& j, const std::string& where);
serve_spec load_serve_file(const std::string& path);

struct serve_result {
  planner::inference_plan plan;
  int64_t requests = 0;
  int64_t samples = 0;
  double seconds = 0;
  double samples_per_s = 0;
  /// Samples answered after the first answer over the time from it to the
  /// last: the full pipeline's rate, which the plan's samples/s predicts
  /// (0 with fewer than two answers). A recovery's re-plan, and the
  /// pipeline after it, fall within it as they come.
  double steady_samples_per_s = 0;
  double latency_p50_ms = 0;
  double latency_p99_ms = 0;
  /// Top-1 accuracy against the dataset's labels; -1 without labels.
  double accuracy = -1;
  /// Every request's output, concatenated in request order (kept in memory:
  /// rows x the model's output size for the whole stream).
  torch::Tensor outputs;
  /// The server's stats (server.hpp), every stage's among them.
  nlohmann::json stats;
};

/// What the planner priced transfers with, in words, from the server's
/// stats' "links": "every link assumed 1 Gbit/s", or "measured, slowest N
/// MB/s" (the slowest directed link between two of the nodes).
std::string describe_links(const nlohmann::json& links);

/// The requests to send: how many, and request i's input (1 to
/// `micro_batch` rows of the model's input), made only when it is sent, so
/// that a long stream does not sit in memory first.
struct request_source {
  int64_t count = 0;
  std::function<torch::Tensor(int64_t)> input;
  /// The requests `inputs` holds, one tensor each.
  static request_source of(std::vector<torch::Tensor> inputs);
};

/// Serves the requests of `source` with the weights of `model`
/// on `devices` and waits for every answer (bounded: each request by the
/// spec's request timeout). `stop_wanted`, asked every 100 ms, stops the
/// server early. Throws std::runtime_error naming what failed (a stop: "the
/// server was stopped").
serve_result run_serve(caf::actor_system& sys, const serve_spec& spec,
                       const std::vector<device_actor>& devices,
                       models::sequential_model model,
                       const request_source& source,
                       const torch::Tensor& labels = {},
                       const std::function<bool()>& stop_wanted = nullptr);

/// The whole program: connects to `spec.nodes`, builds the model and the
/// requests, serves them, writes the metrics, trace and outputs.
serve_result run_serve(const serve_spec& spec,
                       const std::function<bool()>& stop_wanted = nullptr);

} // namespace asteroid::actors
