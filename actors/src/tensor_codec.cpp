#include "asteroid/actors/tensor_codec.hpp"

namespace asteroid::actors {

void add_tensor_message_type(caf::actor_system_config& cfg) {
  cfg.add_message_type<serialization::tensor_message>("asteroid::tensor_message");
}

} // namespace asteroid::actors
