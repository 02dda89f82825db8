#include "asteroid/serialization/tensor_message.hpp"

namespace asteroid::serialization {

std::string to_string(tensor_kind k) {
  switch (k) {
    case tensor_kind::activation: return "activation";
    case tensor_kind::gradient: return "gradient";
    case tensor_kind::all_reduce: return "all_reduce";
    case tensor_kind::snapshot: return "snapshot";
    case tensor_kind::echo: return "echo";
    case tensor_kind::echo_reply: return "echo_reply";
    case tensor_kind::input: return "input";
    case tensor_kind::label: return "label";
  }
  return "kind " + std::to_string(static_cast<int>(k));
}

} // namespace asteroid::serialization
