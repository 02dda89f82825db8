#pragma once
/// \file
/// Messages of the Asteroid runtime (CAF 0.17 atoms) and the configuration
/// every actor system of a job needs.
///
/// Rule (docs/runtime.md, "Messages"): no `float`/`double` ever travels as a CAF
/// message field. Tensors are `serialization::encode_tensor(s)` byte strings
/// inside a `tensor_message` (the one registered type), reports and specs
/// are JSON text; every other field is an integer, a string or an actor
/// handle.
///
/// The actors' contracts are typed interfaces, checked by the compiler on
/// both sides: `device_actor`, `replica_actor`, `micro_batch_actor` and
/// `micro_batch_relay_actor` below (device.cpp, replica.cpp, micro_batch.cpp
/// and micro_batch_relay.cpp implement them; the
/// supervisor, the probes and tests send through them), `stage_actor` in
/// stage.hpp, `supervisor_actor` in supervisor_actor.hpp. What replicas
/// send the supervisor's step driver is `step_driver_actor`, checked where
/// they send it (the step driver is a blocking actor, which CAF 0.17 cannot
/// type; its loop receives these).
///
/// "state" strings are encoded stage states (stage_state.hpp): weights, and
/// optimizer state where there is one. Snapshot keys name a layer range,
/// "L<first>-<end>" (see `range_key`); versions are step numbers: the state
/// *before* that step ran.
#include "asteroid/actors/credentials.hpp"
#include "asteroid/actors/snapshot_store.hpp"
#include "asteroid/actors/tensor_codec.hpp"

#include <caf/all.hpp>
#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/io/all.hpp>

#include <chrono>
#include <string>
#include <vector>

namespace asteroid::actors {

using caps_atom = caf::atom_constant<caf::atom("ast_caps")>;
using deploy_atom = caf::atom_constant<caf::atom("ast_deploy")>;
using link_atom = caf::atom_constant<caf::atom("ast_link")>;
using peer_atom = caf::atom_constant<caf::atom("ast_peer")>;
using start_atom = caf::atom_constant<caf::atom("ast_start")>;
using ack_atom = caf::atom_constant<caf::atom("ast_ack")>;
using state_atom = caf::atom_constant<caf::atom("ast_state")>;
using done_atom = caf::atom_constant<caf::atom("ast_done")>;
using fail_atom = caf::atom_constant<caf::atom("ast_fail")>;
using stop_atom = caf::atom_constant<caf::atom("ast_stop")>;
using inventory_atom = caf::atom_constant<caf::atom("ast_inv")>;
using fetch_atom = caf::atom_constant<caf::atom("ast_fetch")>;
using claim_atom = caf::atom_constant<caf::atom("ast_claim")>;
using release_atom = caf::atom_constant<caf::atom("ast_free")>;
using heartbeat_atom = caf::atom_constant<caf::atom("ast_hb")>;
using slow_atom = caf::atom_constant<caf::atom("ast_slow")>;
using profile_atom = caf::atom_constant<caf::atom("ast_prof")>;
using probe_atom = caf::atom_constant<caf::atom("ast_probe")>;
using adopt_atom = caf::atom_constant<caf::atom("ast_adopt")>;
using reconf_atom = caf::atom_constant<caf::atom("ast_reconf")>;
using halt_atom = caf::atom_constant<caf::atom("ast_halt")>;
using progress_atom = caf::atom_constant<caf::atom("ast_mbprog")>;
using where_atom = caf::atom_constant<caf::atom("ast_where")>;
using reset_atom = caf::atom_constant<caf::atom("ast_reset")>;
using hog_atom = caf::atom_constant<caf::atom("ast_hog")>;
using serve_atom = caf::atom_constant<caf::atom("ast_serve")>;
using stats_atom = caf::atom_constant<caf::atom("ast_stats")>;
using upload_atom = caf::atom_constant<caf::atom("ast_upload")>;
using copy_atom = caf::atom_constant<caf::atom("ast_copy")>;
/// A node's data plane gave up on a peer: (endpoint, why), from the device
/// to the supervisor that claimed it (data_plane::on_unreachable).
using unreachable_atom = caf::atom_constant<caf::atom("ast_unrch")>;

/// How `ast_probe` moves its bytes.
enum probe_path : int32_t {
  probe_caf = 0,        ///< CAF messages (the control path)
  probe_data_plane = 1, ///< the data plane, where tensors travel
  probe_auto = 2,       ///< the data plane where both nodes have one
};

/// Roles of `ast_peer` messages.
enum peer_role : int32_t {
  peer_prev = 0,       ///< replica `index` of the previous stage
  peer_next = 1,       ///< replica `index` of the next stage
  peer_ring_next = 2,  ///< the replica this one sends to in the ring
  peer_supervisor = 3, ///< where reports go (monitored: the replica quits
                       ///< when it goes down)
  peer_backup = 4,     ///< device actor that keeps this stage's replica
  peer_home = 5,       ///< device actor of the replica's own node
};

/// The actor a node publishes (device.cpp). Messages that match none of
/// these (from any peer) are logged and dropped; the device keeps serving.
///
/// A node serves one job at a time (`ast_claim`). While a job holds it, the
/// messages below act only when they come from the claimant's process or
/// the node's own; tensors only when they name the job; the rest are
/// refused (an error reply, or logged and dropped). Capabilities, pings and
/// heartbeats answer anyone.
using device_actor = caf::typed_actor<
  /// Capabilities as JSON (name, memory, threads, slowdown, data port...).
  caf::replies_to<caps_atom>::with<std::string>,
  caf::replies_to<caf::ping_atom>::with<caf::pong_atom>,
  caf::replies_to<heartbeat_atom, int64_t>::with<heartbeat_atom, int64_t>,
  /// A snapshot to keep (key: layer range, step: version), or a link
  /// probe's echo over CAF (answered to its sender with an echo_reply,
  /// unless its step is 0: a probe stream's filler).
  caf::reacts_to<tensor_atom, serialization::tensor_message>,
  /// The snapshots held, as JSON, tagged with the asker's tag.
  caf::replies_to<inventory_atom, int32_t>::with<inventory_atom, int32_t, std::string>,
  /// Serve job `job` (> 0) whose last snapshot version is `last_step`,
  /// for the sender (monitored: the node is free again when it goes down),
  /// giving up a silent data-plane peer after `path_window_ms` (> 0; 0:
  /// the node's own timeouts; data_plane::serve_job): error (another job
  /// holds the node), bytes of an earlier job's snapshots dropped.
  caf::replies_to<claim_atom, int64_t, int64_t, int64_t>::with<std::string, int64_t>,
  /// Job `job` is done with this node: its snapshots are dropped and the
  /// node is free.
  caf::reacts_to<release_atom, int64_t>,
  /// A snapshot of a layer range at a version: error, encoded stage state
  /// (for the node's own replicas: one message, within the process).
  caf::replies_to<fetch_atom, std::string, int64_t>::with<std::string, std::string>,
  /// The same read in pieces, for another process (state_uploads.hpp says
  /// why): range key, version, offset -> error, at most
  /// `state_piece_bytes` from the offset, the snapshot's total size.
  caf::replies_to<fetch_atom, std::string, int64_t, int64_t>::with<std::string, std::string,
                                                                 int64_t>,
  /// Sends this node's snapshot (range key, version) over the data plane
  /// to the device actor with id `destination` of the node whose data
  /// plane listens at `endpoint` ("host:port"), which keeps it as a
  /// snapshot of its own (a recovery's copy from node to node): error,
  /// "" once the frame is handed to the data plane.
  caf::replies_to<copy_atom, std::string, int64_t, std::string, uint64_t>::with<std::string>,
  /// A piece of a stage state for a deployment to come (upload number,
  /// total bytes, offset, at most `state_piece_bytes`): error. Pieces come
  /// in order; a deployment names the upload ("state_upload" in its spec).
  caf::replies_to<upload_atom, int64_t, int64_t, int64_t, std::string>::with<std::string>,
  /// Profiles a model here (request JSON): error, profile JSON.
  caf::replies_to<profile_atom, std::string>::with<std::string, std::string>,
  /// Times the link to the node at endpoint (bytes, repeats, probe_path,
  /// stream): error, latency ns, bytes/s.
  caf::replies_to<probe_atom, std::string, int64_t, int32_t, int32_t,
                  int32_t>::with<std::string, int64_t, int64_t>,
  /// New emulated slowdown (permille >= 1000) for the device and its replicas.
  caf::reacts_to<slow_atom, int32_t>,
  /// Breaks every data-plane connection of the node at once, as a network
  /// fault would (the job's `reset` fault); its links heal by themselves.
  caf::reacts_to<reset_atom>,
  /// Holds this many more bytes resident until the job frees the node (the
  /// job's `hog` fault: memory pressure); 0 gives them back: "" once held,
  /// else why not.
  caf::replies_to<hog_atom, int64_t>::with<std::string>,
  /// Builds a replica (spec JSON, encoded state; empty state and the spec's
  /// restore_version: from this node's snapshots; empty state and the
  /// spec's state_upload: from that upload of the sender's) for the job
  /// that holds the node (the spec names it): error, replica.
  caf::replies_to<deploy_atom, std::string, std::string>::with<std::string, caf::actor>,
  /// Builds a stage of an inference pipeline (inference_spec JSON, encoded
  /// weights of its layers) for the job that holds the node: error, stage
  /// (an inference_stage_actor).
  caf::replies_to<serve_atom, std::string, std::string>::with<std::string, caf::actor>,
  /// A built replica handed back by the device's own builder (id, error).
  caf::reacts_to<adopt_atom, int64_t, std::string, caf::actor>,
  /// Opens a connection to the node at host:port: error.
  caf::replies_to<link_atom, std::string, uint16_t>::with<std::string>,
  /// Stops every replica deployed here; the device stays.
  caf::reacts_to<stop_atom>,
  /// A recovery towards this generation has begun: replicas of older
  /// generations stop at their next op (they may be kept and re-configured,
  /// and would otherwise finish the interrupted step's compute first).
  caf::reacts_to<halt_atom, int64_t>>;

/// The supervisor's step driver, as the replicas of its job see it.
using step_driver_actor = caf::typed_actor<
  /// Replica's report of step `step` (JSON: its times, loss, bytes).
  caf::reacts_to<done_atom, int64_t, std::string>,
  /// The replica failed in generation `generation`, saying why.
  caf::reacts_to<fail_atom, int32_t, std::string>>;

/// A stage replica (replica.cpp): one per device per stage. Messages that
/// match none of these are logged and dropped; the replica keeps running.
using replica_actor = caf::typed_actor<
  /// Its links (peer_role, index, actor, data endpoint): the link's
  /// channel is TCP to that data endpoint, or CAF when it is empty.
  caf::reacts_to<peer_atom, int32_t, int32_t, caf::actor, std::string>,
  /// Run step `step` (starts may arrive ahead of the step); the relay
  /// (`micro_batch_relay_actor`) that takes the replica's reports of each
  /// pass to the step's micro-batch actors (invalid: the job runs without
  /// them).
  caf::reacts_to<start_atom, int64_t, caf::actor>,
  /// Activations, gradients, all-reduce chunks, inputs, labels.
  caf::reacts_to<tensor_atom, serialization::tensor_message>,
  /// A credit back from a peer (generation, kind: 0 activation / 1
  /// gradient, the peer's index).
  caf::reacts_to<ack_atom, int64_t, int32_t, int32_t>,
  /// A new spec (JSON) for a kept replica, replaying from `version`:
  /// error, restored version (-1: its state was kept).
  caf::replies_to<reconf_atom, std::string, int64_t>::with<std::string, int64_t>,
  /// Its encoded stage state (weights and optimizer state), in pieces
  /// (state_uploads.hpp says why; `read_replica_state` reads them all):
  /// offset -> at most `state_piece_bytes` from it, the state's total size.
  /// Offset 0 captures the state; later pieces come from that capture (a
  /// later offset with none under way answers a total of -1).
  caf::replies_to<state_atom, int64_t>::with<std::string, int64_t>,
  /// New emulated slowdown (permille >= 1000).
  caf::reacts_to<slow_atom, int32_t>,
  /// Its own receive-timeout check, once a second.
  caf::reacts_to<caf::tick_atom>,
  /// Its own reminder to report the passes it finished, sent when its
  /// stream starts waiting (the wait's number): reported if that wait still
  /// lasts (stage_executor.cpp). From anyone else: ignored.
  caf::reacts_to<progress_atom, int64_t>,
  caf::reacts_to<stop_atom>>;

/// One micro-batch of one step (micro_batch.cpp): spawned in the supervisor's
/// process when the supervisor injects the micro-batch, gone after the last
/// backward pass of it. It knows which replica holds which rows of it at
/// every stage (micro_batch_progress.hpp) and is what a recovery asks about
/// the work a loss interrupted. Reports that match no piece are logged and
/// dropped.
using micro_batch_actor = caf::typed_actor<
  /// Replica `replica` of stage `stage` finished a pass (micro_batch_pass:
  /// 0 forward, 1 backward) of its rows.
  caf::reacts_to<progress_atom, int32_t, int32_t, int32_t>,
  /// Where the micro-batch is (micro_batch_progress::where, as JSON).
  caf::replies_to<where_atom>::with<std::string>,
  caf::reacts_to<stop_atom>>;

/// The job's micro-batch relay (micro_batch_relay.cpp): one per step driver,
/// in the supervisor's process, next to the micro-batch actors. A replica
/// sends it the passes it finished since its last report in one message,
/// and the relay tells each pass to its micro-batch's actor: one remote
/// message per report instead of one per pass, and one proxy on each node
/// for the whole job instead of one per micro-batch actor per step.
/// Reports of a step it does not know (or of another deployment's replicas),
/// or that name no micro-batch of it, are dropped; the step's actors come
/// only from its own process.
using micro_batch_relay_actor = caf::typed_actor<
  /// Replica `replica` of stage `stage`, deployed in generation
  /// `generation`, finished these passes of step `step`, each
  /// `2 * micro-batch + pass` (micro_batch_pass), in order.
  caf::reacts_to<progress_atom, int64_t, int64_t, int32_t, int32_t, std::vector<int32_t>>,
  /// Step `step`'s micro-batch actors, by micro-batch, for the replicas of
  /// generation `generation`.
  caf::reacts_to<adopt_atom, int64_t, int64_t, std::vector<caf::actor>>,
  /// Step `step` is over: its actors are forgotten (-1: every step). The
  /// reply counts the passes relayed for it (-1 to another process).
  caf::replies_to<release_atom, int64_t>::with<int64_t>,
  caf::reacts_to<stop_atom>>;

/// The snapshots a node holds that tile a replica's layers (snapshot_store::
/// parts): passed within a node only, from its device to its builder.
using snapshot_parts = std::vector<snapshot_bytes>;

} // namespace asteroid::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(asteroid::actors::snapshot_parts)

namespace asteroid::actors {

/// A device's replica builder (device.cpp): builds one replica at a time on
/// its own thread and hands it back to the device.
/// (id, spec JSON, encoded state, the deploying supervisor's process).
/// A replica restored from the node's snapshots gets their parts instead of
/// a state: merging them decodes and encodes every tensor (1.1-1.3 s for
/// 126 MB on a 2-core development host), and on the device's thread that
/// held heartbeat answers back until a loaded node was counted lost.
/// The same for an inference stage (`serve_atom`, inference_spec JSON).
using replica_builder_actor = caf::typed_actor<
  caf::replies_to<deploy_atom, int64_t, std::string, std::string, caf::node_id>::with<
    adopt_atom, int64_t, std::string, caf::actor>,
  caf::replies_to<deploy_atom, int64_t, std::string, snapshot_parts, caf::node_id>::with<
    adopt_atom, int64_t, std::string, caf::actor>,
  caf::replies_to<serve_atom, int64_t, std::string, std::string, caf::node_id>::with<
    adopt_atom, int64_t, std::string, caf::actor>>;

/// Snapshot key of layers [first, end): "L<first>-<end>".
inline std::string range_key(int first, int end) {
  return "L" + std::to_string(first) + "-" + std::to_string(end);
}

/// Middleman settings shared by every process of a job.
struct net_options {
  /// BASP heartbeat period; off in CAF 0.17 by default, so we turn it on.
  std::chrono::milliseconds heartbeat{500};
  /// A connection silent this long is dropped; must exceed the time one
  /// message takes to transfer (CAF sends one message on a connection
  /// before the next; docs/runtime.md, "Moving stage states").
  std::chrono::milliseconds connection_timeout{15000};
  /// The cluster's credentials (credentials.hpp). Set: CAF connections this
  /// actor system opens or accepts are TLS, mutually authenticated by the
  /// cluster's CA (CAF's OpenSSL module); empty: plain TCP.
  credentials tls;
};

/// Loads the middleman (and, with `net.tls`, CAF's OpenSSL module with the
/// credentials, checked first) and applies `net` to `cfg`. Throws
/// std::invalid_argument naming the file of bad credentials.
void configure(caf::actor_system_config& cfg, const net_options& net = {});

/// `remote_actor` with a timeout (CAF 0.17's own blocks forever on a peer
/// that accepts TCP but never answers the handshake), over TLS when `sys`
/// was configured with credentials. A handshake that CAF
/// drops at a heartbeat tick (connection_timeout) is tried again until
/// `timeout` is spent. Throws std::runtime_error naming `host:port` on
/// failure or timeout.
caf::actor connect(caf::actor_system& sys, const std::string& host,
                   uint16_t port, std::chrono::milliseconds timeout);

/// `connect` to the device actor a node publishes. CAF cannot check a
/// remote actor's interface here (the node may run another build): a peer
/// that is not a device answers no request, and every request has a timeout.
device_actor connect_device(caf::actor_system& sys, const std::string& host,
                            uint16_t port, std::chrono::milliseconds timeout);

/// `connect_device` to every "host:port" of `endpoints`, in
/// order; throws naming the first node that cannot be reached.
std::vector<device_actor> connect_all(caf::actor_system& sys,
                                    const std::vector<std::string>& endpoints,
                                    std::chrono::milliseconds timeout);

/// Whether `sys` connects and publishes with TLS (configured with
/// credentials).
bool uses_tls(caf::actor_system& sys);

/// Splits "host:port"; throws std::invalid_argument naming the text.
std::pair<std::string, uint16_t> parse_endpoint(const std::string& text);

} // namespace asteroid::actors
