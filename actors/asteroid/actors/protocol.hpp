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
/// | message (atom, fields...)                      | to      | reply            |
/// |------------------------------------------------|---------|------------------|
/// | `ast_caps`                                     | device  | string (JSON)    |
/// | `ping_atom`                                    | device  | `pong_atom`      |
/// | `ast_deploy, string spec_json, string state`   | device  | string err, actor|
/// | `ast_inv, int32 tag`                           | device  | `ast_inv, int32 tag, string json` |
/// | `ast_fetch, string key, int64 version`         | device  | string err, string state |
/// | `ast_forget`                                   | device  | int64 bytes dropped |
/// | `ast_hb, int64 seq`                            | device  | `ast_hb, int64 seq` |
/// | `ast_slow, int32 permille`                     | device, replica | -        |
/// | `ast_prof, string request_json`                | device  | string err, string profile_json |
/// | `ast_probe, string endpoint, int64 bytes, int32 repeats, int32 path, int32 stream` | device | string err, int64 latency_ns, int64 bytes_per_s |
/// | `ast_link, string host, uint16 port`           | device  | string err       |
/// | `ast_adopt, int64 id, string err, actor replica` | device | - (from its own replica builder only) |
/// | `ast_peer, int32 role, int32 index, actor, string data_endpoint` | replica | - (the link's channel: TCP to that data endpoint, or CAF when empty) |
/// | `ast_start, int64 step`                        | replica | -                |
/// | `ast_reconf, string spec_json, int64 version`  | replica | string err, int64 restored version (-1: state kept) |
/// | `ast_tensor, tensor_message` (tensor_codec.hpp): activations, gradients, all-reduce chunks, inputs, labels | replica | - |
/// | `ast_tensor, tensor_message` of kind snapshot   | device  | -                |
/// | `ast_tensor, tensor_message` of kind echo (a link probe over CAF) | device | - (sends the sender an echo_reply) |
/// | `ast_ack, int64 generation, int32 kind, int32 from` | replica | -           |
/// | `ast_state`                                    | replica | string stage state |
/// | `ast_done, int64 step, string report_json`     | supervisor | -             |
/// | `ast_fail, int32 generation, string what`      | supervisor | -             |
/// | `ast_stop`                                     | replica | -                |
///
/// "state" strings are encoded stage states (stage_state.hpp): weights, and
/// optimizer state where there is one. Snapshot keys name a layer range,
/// "L<first>-<end>" (see `range_key`); versions are step numbers: the state
/// *before* that step ran.
#include "asteroid/actors/tensor_codec.hpp"

#include <caf/all.hpp>
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
using forget_atom = caf::atom_constant<caf::atom("ast_forget")>;
using heartbeat_atom = caf::atom_constant<caf::atom("ast_hb")>;
using slow_atom = caf::atom_constant<caf::atom("ast_slow")>;
using profile_atom = caf::atom_constant<caf::atom("ast_prof")>;
using probe_atom = caf::atom_constant<caf::atom("ast_probe")>;
using adopt_atom = caf::atom_constant<caf::atom("ast_adopt")>;
using reconf_atom = caf::atom_constant<caf::atom("ast_reconf")>;

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

/// Snapshot key of layers [first, end): "L<first>-<end>".
inline std::string range_key(int first, int end) {
  return "L" + std::to_string(first) + "-" + std::to_string(end);
}

/// Middleman settings shared by every process of a job.
struct net_options {
  /// BASP heartbeat period; off in CAF 0.17 by default, so we turn it on.
  std::chrono::milliseconds heartbeat{500};
  /// A connection silent this long is dropped; must exceed the time one
  /// message takes to transfer (notes §1).
  std::chrono::milliseconds connection_timeout{15000};
};

/// Loads the middleman and applies `net` to `cfg`.
void configure(caf::actor_system_config& cfg, const net_options& net = {});

/// `remote_actor` with a timeout (CAF 0.17's own blocks forever on a peer
/// that accepts TCP but never answers the handshake). A handshake that CAF
/// drops at a heartbeat tick (connection_timeout) is tried again until
/// `timeout` is spent. Throws std::runtime_error naming `host:port` on
/// failure or timeout.
caf::actor connect(caf::actor_system& sys, const std::string& host,
                   uint16_t port, std::chrono::milliseconds timeout);

/// `connect` to every "host:port" of `endpoints`, in order; throws naming
/// the first node that cannot be reached.
std::vector<caf::actor> connect_all(caf::actor_system& sys,
                                    const std::vector<std::string>& endpoints,
                                    std::chrono::milliseconds timeout);

/// Splits "host:port"; throws std::invalid_argument naming the text.
std::pair<std::string, uint16_t> parse_endpoint(const std::string& text);

} // namespace asteroid::actors
