#include "asteroid/actors/channel.hpp"

#include "channels/caf_channel.hpp"
#include "channels/tcp_channel.hpp"

#include <spdlog/spdlog.h>

#include <caf/all.hpp>

namespace asteroid::actors {

channel_ptr make_caf_channel(caf::actor to) {
  return std::make_shared<channels::caf_channel>(std::move(to));
}

channel_ptr make_tcp_channel(std::shared_ptr<data_plane> dp, std::string endpoint,
                             uint64_t destination) {
  return std::make_shared<channels::tcp_channel>(std::move(dp), std::move(endpoint),
                                                 destination);
}

channel_ptr open_channel(const caf::actor& to, std::shared_ptr<data_plane> dp,
                         const std::string& data_endpoint) {
  if (dp && !data_endpoint.empty() && to) {
    try {
      return make_tcp_channel(std::move(dp), data_endpoint, to.id());
    } catch (const std::exception& e) {
      spdlog::error("data endpoint '{}' refused ({}); the link uses CAF "
                    "messages", data_endpoint, e.what());
    }
  }
  return make_caf_channel(to);
}

} // namespace asteroid::actors
