#pragma once
// A replica's links to its neighbour stages and its ring successor: tensors
// go on each peer's channel (channel.hpp: TCP on the data plane where the
// supervisor gave the peer's data endpoint, else CAF messages); each (sender, receiver, direction) link holds at most
// `credit_window` un-acknowledged micro-batches.
#include "replica_state.hpp"

#include "asteroid/serialization/tensor_message.hpp"

namespace asteroid::actors::detail {

/// Sends `m` to the peer (`role`, `index`) on its channel (channel.hpp).
/// A peer without one, or a message its channel drops, fails the replica.
void transmit(replica_self* self, int role, int index,
              serialization::tensor_message m);

/// A tensor message of this replica's generation and current step.
serialization::tensor_message outgoing(const replica_self* self,
                                       serialization::tensor_kind kind);

/// Sends my rows of `t` (micro-batch `mb`: an activation to stage
/// `peer_stage` = stage + 1, or a gradient to stage - 1) to each replica of
/// that stage whose rows overlap mine, within the credit window. Returns
/// false while some receiver lacks credit (the caller retries on its ack;
/// receivers already served are not sent again).
bool send_pieces(replica_self* self, bool activation, int peer_stage, int mb,
                 const torch::Tensor& t);

/// Collects and acknowledges the pieces of micro-batch `mb` from the
/// replicas of the neighbour stage whose rows overlap mine; returns an
/// undefined tensor while some are missing.
torch::Tensor take_pieces(replica_self* self, bool activation, int mb);

} // namespace asteroid::actors::detail
