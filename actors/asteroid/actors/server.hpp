#pragma once
/// \file
/// The inference server (EdgePipe on the device actors): claims the nodes,
/// plans a pipeline of one device per stage (or takes the caller's), builds
/// each stage on its node with its weights, wires the stages and then
/// answers requests. A request is one micro-batch; the server keeps at most
/// `max_in_flight` of them in the pipeline, queues the rest, and answers
/// them in the order they came. It is an event-based actor: a program talks
/// to it by message (run_serve in serve.hpp is such a program).
///
/// A node that is lost while it serves (its connection closes, its stage
/// goes down, or it stops answering the server's heartbeats, as a hung
/// process or a cut link with its connection still open does) is left out;
/// a node that ran no stage changes nothing else.
/// Otherwise the server plans the model again on the nodes
/// left (EdgePipe's planner, also when the caller gave the stages), builds
/// the new stages from its own copy of the weights, and sends every request
/// that was in flight again; outputs of the replaced pipeline are dropped by
/// their generation, so each request is answered once. A node lost for its
/// silence that answers a heartbeat again (a stopped process continued, a
/// link healed) is taken back: the server plans again over every node not
/// lost, the same way. A request the
/// pipeline does not answer within `request_timeout_ms` for any other
/// reason fails every request not yet answered, naming it, and the server
/// stops serving (as it does after a loss with `recover` off, or when no
/// plan fits the nodes left).
#include "asteroid/actors/protocol.hpp"
#include "asteroid/models/sequential_model.hpp"
#include "asteroid/planner/cluster.hpp"
#include "asteroid/planner/inference_plan.hpp"
#include "asteroid/planner/model_profile.hpp"

#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace asteroid::actors {

using infer_atom = caf::atom_constant<caf::atom("ast_infer")>;

struct server_options {
  /// The model (training::build_model name and options) the weights belong
  /// to.
  std::string model;
  nlohmann::json model_options = nlohmann::json::object();
  /// "host:port" of each device, in the order of the handles (names in
  /// logs, and the data endpoints stages send to); may be empty for
  /// in-process devices.
  std::vector<std::string> nodes;
  /// Where each stage runs; no stages: the server plans with `planner`.
  planner::inference_plan plan;
  /// "edgepipe" (the dynamic program), "straight" or "on-device".
  std::string planner = "edgepipe";
  /// The planner's model profile: `profile`, else the file at
  /// `profile_path` (planner::load_model_profile_file), else the server
  /// profiles the model itself (profile_for_serving, on its own thread).
  std::optional<planner::model_profile> profile;
  std::string profile_path;
  /// The links between the nodes as measured (remote_probe.hpp's
  /// measure_cluster over the same devices, in the same order): the
  /// planner prices every transfer with them. None: every link counts as
  /// 1 Gbit/s. Either way a transfer costs the bytes `activation_codec`
  /// puts on the wire.
  std::optional<planner::cluster> links;
  /// Rows per request (the micro-batch every stage computes at once).
  int64_t micro_batch = 8;
  /// Requests in the pipeline at once (0: stages + 1); every stage's
  /// receive queue holds at most this many.
  int max_in_flight = 0;
  /// How outputs cross links between stages (kernels::wire_codec names).
  std::string activation_codec = "none";
  /// > 0: only links slower than this many Mbit/s (as measured in `links`,
  /// else 1,000) carry `activation_codec`; faster ones carry outputs as
  /// computed. 0: every link carries it.
  double compress_below_mbps = 0;
  /// Stages send to each other on the nodes' data planes (else in CAF
  /// messages).
  bool data_plane = true;
  int64_t connect_timeout_ms = 3000;
  /// A request the pipeline has not answered this long after it entered
  /// fails the server; also the bound on each deployment.
  int64_t request_timeout_ms = 60000;
  /// Re-plan and go on when a node is lost (else: fail, see above).
  bool recover = true;
  /// The server pings every node it claimed each `heartbeat_ms` and counts
  /// a node lost once it has not answered for `heartbeat_misses` pings (3 s
  /// of silence by default, where training allows 1 s: a false alarm costs
  /// two re-plans, out and back in when the node answers again).
  int64_t heartbeat_ms = 500;
  int heartbeat_misses = 6;
  /// Requests queued behind the window; more are refused (naming this
  /// bound) until the pipeline drains, so a caller that sends without
  /// waiting cannot make the server grow without bound.
  int64_t max_waiting = 4096;
  /// Answers whose latency the stats keep (the most recent ones).
  int64_t latency_window = 100000;
};

/// Starts (`start_atom`) with the plan as JSON, or why not; requests carry
/// an encoded tensor (serialization::encode_tensor) of 1 to `micro_batch`
/// rows of the model's input and are answered with the model's output for
/// them (error, encoded output); stats (JSON) say what the server and every
/// stage did: requests, samples/s (from the first request sent, and
/// `steady_samples_per_s` from the first answer on), latency p50 and p99,
/// each stage's busy time and queue depth, trace events.
using server_actor = caf::typed_actor<
  caf::replies_to<start_atom>::with<std::string, std::string>,
  caf::replies_to<infer_atom, std::string>::with<std::string, std::string>,
  /// Outputs of the last stage.
  caf::reacts_to<tensor_atom, serialization::tensor_message>,
  caf::replies_to<stats_atom>::with<std::string>,
  /// Its own clock: heartbeats, and requests past their timeout.
  caf::reacts_to<caf::tick_atom>,
  /// A node's answer to the server's ping (its index and the round).
  caf::reacts_to<heartbeat_atom, int64_t>,
  /// From a node the server claimed: its data plane gave up on the peer at
  /// `endpoint` (why). Handled as the loss of one of the two
  /// (unreachable_reports.hpp, as a training job does), which is taken back
  /// once a probe over that path gets through (cut_paths.hpp).
  caf::reacts_to<unreachable_atom, std::string, std::string>,
  /// From the helper the server spawned to probe the failed path to node
  /// `d` (its index): whether the probe got through.
  caf::reacts_to<probe_atom, int64_t, bool>,
  /// Stops the stages, frees the nodes, fails what is not answered.
  caf::reacts_to<stop_atom>>;

/// The model's profile as the server plans with it: every layer's forward
/// time at `micro_batch` samples on one LibTorch thread (as nodes compute
/// by default), after warm-up passes, timed as a stage computes (forward
/// only, eval mode, no autograd: profiler_options::forward_only). Take it
/// before node processes start on the same host and before the program's
/// actor system starts, where it can: on a 2-core host, profiles taken
/// with either running came out 1.4 to 2.8 times slower than the nodes then
/// computed, and the planner picked worse pipelines from them (serve_bench,
/// docs/inference.md).
planner::model_profile profile_for_serving(const std::string& model,
                                           const nlohmann::json& model_options,
                                           int64_t micro_batch);

/// A server on `devices` (connect_all) with the weights of `model` (all its
/// layers built; the server sends each stage its range). Throws
/// std::invalid_argument for options that cannot work (no devices, a
/// micro-batch below 1, an unknown planner or codec, timeouts, heartbeats or
/// queue bounds below 1).
server_actor spawn_server(caf::actor_system& sys, server_options options,
                          std::vector<device_actor> devices,
                          models::sequential_model model);

} // namespace asteroid::actors
