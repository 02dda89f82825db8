#pragma once
// The inference server's state and the functions its two files share:
// server.cpp (requests, answers, heartbeats, the behavior) and
// server_pipeline.cpp (claim, plan, build and wire the stages, and plan
// again after a loss).
#include "asteroid/actors/heartbeat_monitor.hpp"
#include "asteroid/actors/inference_stage.hpp"
#include "asteroid/actors/server.hpp"
#include "cut_paths.hpp"
#include "unreachable_reports.hpp"

#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace asteroid::actors::serving {

using nlohmann::json;
using server_clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

struct request_entry {
  int64_t id = 0;
  int64_t rows = 0;
  std::string input;
  caf::typed_response_promise<std::string, std::string> promise;
  server_clock::time_point arrived;
  server_clock::time_point sent;
};

enum class server_phase { idle, starting, serving, recovering, failed, stopped };

struct server_state {
  server_options opts;
  std::vector<device_actor> devices;
  models::sequential_model model{nullptr};
  int64_t job = 0;
  server_phase phase = server_phase::idle;
  std::string failure;
  /// The answer to `start_atom`, until the server serves or fails.
  std::optional<caf::typed_response_promise<std::string, std::string>> started;
  std::vector<json> caps;
  std::vector<int> claimed;
  /// Devices lost while serving: the plans after a loss leave them out.
  std::set<int> dead;
  /// Those of them lost for their silence (heartbeats), not a closed
  /// connection: still pinged, and taken back when one answers.
  std::set<int> silent;
  /// Reports of peers a node's data plane gave up on, and who they lose; a
  /// node lost that way is in `dead` but not `silent`: not pinged, and taken
  /// back only once a probe over the failed path gets through (`cut`).
  detail::unreachable_reports unreachable;
  /// The failed paths of nodes lost that way, and when to probe each again.
  detail::cut_paths cut;
  /// The helper probing each such node's path now: only its outcome counts.
  std::map<int, caf::actor_addr> probing;
  /// Nodes whose path a probe got through (and the node it was probed
  /// from), waiting for the server to serve (a recovery under way).
  std::map<int, int> healed;
  /// Bumped by every recovery: stages stamp their outputs with it, and an
  /// output of an older pipeline (a request it computed before the loss,
  /// answered again by the new one) is dropped.
  int64_t generation = 1;
  /// Numbers the stage weights this server sends to nodes in pieces.
  int64_t uploads = 0;
  std::optional<planner::model_profile> profile;
  std::optional<server_clock::time_point> recovering_since;
  /// The server's clock (ticks: heartbeats, timeouts), from the claim until
  /// the server fails or stops: a scheduled actor that sends the ticks. Its
  /// timers refer to it, not to the server: a detached actor that a pending
  /// timer still refers to when the actor system shuts down keeps the
  /// system's destructor waiting for ever.
  caf::actor metronome;
  /// Watches the claimed nodes from the claim on (indices: devices).
  std::optional<heartbeat_monitor> heartbeats;
  std::vector<json> recoveries;
  planner::inference_plan plan;
  std::vector<inference_stage_actor> stages;
  int window = 1;
  /// The model's input per sample, and its dtype: what a request must be.
  models::shape_t sample_shape;
  torch::Dtype input_dtype = torch::kFloat32;
  int64_t next_id = 0;
  int64_t next_answer = 0;
  std::deque<request_entry> waiting;
  std::map<int64_t, request_entry> in_flight;
  /// Computed, waiting for an earlier request's answer.
  std::map<int64_t, std::pair<request_entry, std::string>> done;
  int64_t answered = 0;
  int64_t samples = 0;
  std::optional<server_clock::time_point> first_sent;
  server_clock::time_point last_answer;
  /// The first answer and its rows: the steady-state rate counts from it.
  std::optional<server_clock::time_point> first_answer;
  int64_t first_answer_samples = 0;
  std::deque<double> latencies_ms;
};

using server_self = server_actor::stateful_pointer<server_state>;

/// A node's name for messages: its capabilities' name, else its endpoint.
std::string who(const server_state& st, int d);
bool ended(const server_state& st);
/// Ends serving: every request not answered gets `why`.
void fail(server_self self, const std::string& why, server_phase to = server_phase::failed);
/// Sends request `r` into the pipeline (again, after a recovery).
void send_request(server_self self, request_entry& r);
/// Moves waiting requests into the pipeline while the window has room.
void pump(server_self self);
/// Starts the server's clock (server_state::metronome).
void start_clock(server_self self);

// server_pipeline.cpp
/// Claims the nodes, reads their capabilities, plans, deploys and wires;
/// answers `st.started` when serving or failed.
void start(server_self self);
/// Node `d` is gone (`why`): plan around it, or fail.
void node_lost(server_self self, int d, const std::string& why);
/// The sender `from` (a node of this server, or the report is dropped)
/// cannot reach the data plane at `endpoint` (`why`): kept until judged
/// (judge_unreachable).
void hold_unreachable(server_self self, const caf::strong_actor_ptr& from,
                      const std::string& endpoint, const std::string& why);
/// Loses the device the reports held lose now, if any (a report about a node
/// silent to heartbeats waits for them).
void judge_unreachable(server_self self, server_clock::time_point now);
/// Node `d`, lost for its silence, answered again: while serving, it is
/// taken back and the model planned again over every node not lost (else
/// nothing yet: its next answer tries again).
void node_returned(server_self self, int d);
/// Takes node `d` back (`why`): the model is planned again over every node
/// not lost, with `d` recorded as rejoined. While serving only.
void take_back(server_self self, int d, const std::string& why);

// server_path_probes.cpp
/// Starts the probes of failed paths that are due (on helper actors, which
/// answer with probe_atom), and takes back a node whose path got through
/// while a recovery was under way, once the server serves again.
void probe_cut_paths(server_self self, server_clock::time_point now);
/// The helper `from` probed the failed path to node `d`: `answered` or not.
void path_probed(server_self self, const caf::actor_addr& from, int d, bool answered);
void stop_stages(server_self self);
void release_nodes(server_self self);

} // namespace asteroid::actors::serving
