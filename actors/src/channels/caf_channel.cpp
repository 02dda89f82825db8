#include "caf_channel.hpp"

#include "asteroid/actors/tensor_codec.hpp"

#include <caf/all.hpp>

namespace asteroid::actors::channels {

caf_channel::caf_channel(caf::actor to) : to_(std::move(to)) {}

std::string caf_channel::describe() const {
  return "caf to actor " + std::to_string(to_ ? to_.id() : 0);
}

std::string caf_channel::send(caf::local_actor* from,
                              serialization::tensor_message m) {
  if (!to_)
    return "no receiver";
  // As the sending actor itself would: a CAF receiver can answer it.
  caf::unsafe_send_as(from, to_, tensor_atom::value, std::move(m));
  return {};
}

} // namespace asteroid::actors::channels
