#pragma once
// The TCP backend of `channel`: a tensor message as a frame on the data
// plane (data_plane.hpp), whose writer thread owns the connection.
#include "asteroid/actors/channel.hpp"

#include <cstdint>

namespace asteroid::actors::channels {

class tcp_channel final : public channel {
public:
  tcp_channel(std::shared_ptr<data_plane> dp, std::string endpoint,
              uint64_t destination);
  const char* transport() const noexcept override { return "tcp"; }
  std::string describe() const override;
  std::string send(caf::local_actor* from,
                   serialization::tensor_message m) override;

private:
  std::shared_ptr<data_plane> dp_;
  std::string endpoint_;
  uint64_t destination_;
};

} // namespace asteroid::actors::channels
