#pragma once
// The CAF backend of `channel`: a tensor message as a CAF message.
#include "asteroid/actors/channel.hpp"

#include <caf/actor.hpp>

namespace asteroid::actors::channels {

class caf_channel final : public channel {
public:
  explicit caf_channel(caf::actor to);
  const char* transport() const noexcept override { return "caf"; }
  std::string describe() const override;
  std::string send(caf::local_actor* from,
                   serialization::tensor_message m) override;

private:
  caf::actor to_;
};

} // namespace asteroid::actors::channels
