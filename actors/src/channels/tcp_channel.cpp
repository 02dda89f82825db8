#include "tcp_channel.hpp"

#include "asteroid/actors/data_plane.hpp"
#include "asteroid/actors/protocol.hpp"

#include <stdexcept>

namespace asteroid::actors::channels {

tcp_channel::tcp_channel(std::shared_ptr<data_plane> dp, std::string endpoint,
                         uint64_t destination)
  : dp_(std::move(dp)), endpoint_(std::move(endpoint)), destination_(destination) {
  if (!dp_)
    throw std::invalid_argument("a tcp channel needs this process's data plane");
  parse_endpoint(endpoint_); // throws, naming the endpoint
}

std::string tcp_channel::describe() const {
  return "tcp to " + endpoint_ + ", actor " + std::to_string(destination_);
}

std::string tcp_channel::send(caf::local_actor*, serialization::tensor_message m) {
  if (!dp_->send(endpoint_, destination_, std::move(m)))
    return "data plane: frame to " + endpoint_
           + " dropped (its queue stayed full, or the plane is stopping)";
  return {};
}

} // namespace asteroid::actors::channels
