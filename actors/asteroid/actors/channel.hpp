#pragma once
/// \file
/// One transport interface for tensor messages (the way tensorpipe puts
/// every transport behind one interface): a `channel` is one direction of a
/// link to one actor. The transport is chosen once, when the link is made
/// at deployment (`open_channel`), never at each send; senders only call
/// `send`. Whichever backend carried it, the receiver gets the same
/// `(tensor_atom, tensor_message)` and answers nothing: acks and replies
/// that a protocol needs are messages of their own.
///
/// Backends, each the same pair of files under `actors/src/channels/`:
/// - `caf_channel`: a CAF message (same process, or the middleman between
///   processes; the control path);
/// - `tcp_channel`: a frame on this process's data plane (data_plane.hpp)
///   to the data plane of the receiver's node.
#include "asteroid/actors/fwd.hpp"
#include "asteroid/serialization/tensor_message.hpp"

#include <caf/fwd.hpp>

#include <memory>
#include <string>

namespace asteroid::actors {

class channel {
public:
  virtual ~channel() = default;
  /// "caf" or "tcp".
  virtual const char* transport() const noexcept = 0;
  /// Where the messages go, for logs ("caf to actor 42",
  /// "tcp to 10.0.0.2:27001, actor 42").
  virtual std::string describe() const = 0;
  /// Hands `m` to the transport on behalf of `from` (a CAF receiver sees
  /// `from` as the sender). Returns an empty string, or why `m` was
  /// dropped; the caller decides what a drop means.
  virtual std::string send(caf::local_actor* from,
                           serialization::tensor_message m) = 0;
};

/// A channel whose messages are CAF messages to `to`.
channel_ptr make_caf_channel(caf::actor to);

/// A channel whose messages are frames on `dp` to actor id `destination`
/// of the data plane at `endpoint` ("host:port"); destination 0 is that
/// plane itself (it answers probes' echoes). Throws std::invalid_argument
/// for a null plane or an endpoint that does not parse.
channel_ptr make_tcp_channel(std::shared_ptr<data_plane> dp,
                             std::string endpoint, uint64_t destination);

/// The deployment's choice for a link to `to`: TCP when this process has a
/// data plane and the supervisor gave the receiver's data endpoint, CAF
/// otherwise (same node, no data plane, `"data_plane": false`). An endpoint
/// that does not parse is logged and the link falls back to CAF, so a bad
/// address costs speed, not the job.
channel_ptr open_channel(const caf::actor& to, std::shared_ptr<data_plane> dp,
                         const std::string& data_endpoint);

} // namespace asteroid::actors
