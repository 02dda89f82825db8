#include "replica_links.hpp"

#include "asteroid/actors/data_plane.hpp"
#include "asteroid/actors/protocol.hpp"
#include "asteroid/actors/wire_compression.hpp"
#include "asteroid/serialization/tensor_wire.hpp"

#include <algorithm>
#include <stdexcept>

namespace asteroid::actors::detail {

void transmit(replica_self* self, int role, int index,
              serialization::tensor_message m) {
  auto& st = self->state;
  auto ch = st.channels.find({role, index});
  if (ch == st.channels.end()) {
    fail(self, "no channel to peer " + std::to_string(index) + " of role "
                 + std::to_string(role));
    return;
  }
  auto err = ch->second->send(self, std::move(m));
  if (!err.empty())
    fail(self, ch->second->describe() + ": " + err);
}

serialization::tensor_message outgoing(const replica_self* self,
                                       serialization::tensor_kind kind) {
  serialization::tensor_message m;
  m.kind = kind;
  m.job = self->state.e->spec.job;
  m.generation = self->state.e->spec.generation;
  m.step = self->state.step;
  m.sender = static_cast<int32_t>(self->state.e->spec.replica);
  return m;
}

namespace {

void send_bytes(replica_self* self, int index, bool activation, int mb, const torch::Tensor& t,
                const std::string& link) {
  auto& st = self->state;
  auto m = outgoing(self, activation ? serialization::tensor_kind::activation
                                     : serialization::tensor_kind::gradient);
  m.micro_batch = static_cast<int32_t>(mb);
  const auto& e = *st.e;
  // Activations go to the next stage, gradients to the one before.
  const auto codec = e.link_codec(activation, activation, index);
  m.payload = activation ? encode_wire_payload(t, codec)
                         : encode_wire_payload(t, codec, e.gradient_feedback.get(),
                                               int64_t{index} * 65536 + mb);
  st.bytes[link] += static_cast<int64_t>(m.payload.size());
  transmit(self, activation ? peer_next : peer_prev, index, std::move(m));
}

} // namespace

bool send_pieces(replica_self* self, bool activation, int peer_stage, int mb,
                 const torch::Tensor& t) {
  auto& st = self->state;
  auto& e = *st.e;
  // The stream names the stage it sends to; check_stream let through only
  // the neighbour that this direction allows.
  const bool downstream = peer_stage > e.spec.stage;
  const auto& peers_span = downstream ? e.next : e.prev;
  auto& peers = downstream ? st.next : st.prev;
  auto& unacked = downstream ? st.unacked_next : st.unacked_prev;
  for (size_t q = 0; q < peers_span.size(); ++q) {
    auto ov = overlap(e.mine, peers_span[q]);
    if (ov.empty() || st.served.count(static_cast<int>(q)))
      continue;
    if (unacked[q] >= e.spec.credit_window)
      return false;
    if (!peers[q])
      throw std::runtime_error("no handle for replica " + std::to_string(q)
                               + " of stage " + std::to_string(peer_stage));
    auto piece = t.slice(0, ov.begin - e.mine.begin, ov.end - e.mine.begin);
    send_bytes(self, static_cast<int>(q), activation, mb, piece,
               link_name(e.spec.stage, e.spec.replica, peer_stage,
                         static_cast<int>(q)));
    ++unacked[q];
    st.max_unacked = std::max(st.max_unacked, unacked[q]);
    st.served.insert(static_cast<int>(q));
  }
  st.served.clear();
  return true;
}

torch::Tensor take_pieces(replica_self* self, bool activation, int mb) {
  auto& st = self->state;
  auto& e = *st.e;
  const auto& peers_span = activation ? e.prev : e.next;
  auto& store = activation ? st.acts : st.grads;
  std::vector<int> from;
  for (size_t r = 0; r < peers_span.size(); ++r)
    if (!overlap(e.mine, peers_span[r]).empty()) {
      if (!store.count({st.step, mb, static_cast<int>(r)}))
        return {};
      from.push_back(static_cast<int>(r));
    }
  std::vector<torch::Tensor> parts;
  for (int r : from) {
    auto key = std::make_tuple(st.step, mb, r);
    parts.push_back(store[key]);
    store.erase(key);
    auto& peer = activation ? st.prev[r] : st.next[r];
    self->send(peer, ack_atom::value, int64_t{e.spec.generation},
               static_cast<int32_t>(activation ? 0 : 1),
               static_cast<int32_t>(e.spec.replica));
  }
  return parts.size() == 1 ? parts[0] : torch::cat(parts, 0);
}

} // namespace asteroid::actors::detail
