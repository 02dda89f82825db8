#pragma once
/// \file
/// How a serialization::tensor_message travels in CAF: as one registered
/// type behind `tensor_atom`, the same struct a data-plane frame decodes to
/// (serialization/frame.hpp). A receiver has one handler for tensors,
/// whichever way they came.
#include "asteroid/serialization/tensor_message.hpp"

#include <caf/all.hpp>

namespace asteroid::serialization {

/// CAF's serialization of a tensor message (found by argument-dependent
/// lookup). Only integers and byte strings: nothing CAF 0.17 mangles.
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, tensor_message& x) {
  return f(caf::meta::type_name("asteroid::tensor_message"), x.kind,
           x.job, x.generation, x.step, x.micro_batch, x.piece, x.sender, x.key,
           x.payload);
}

} // namespace asteroid::serialization

namespace asteroid::actors {

using tensor_atom = caf::atom_constant<caf::atom("ast_tensor")>;

/// Registers the tensor message type with `cfg` (done by `configure`): every
/// process of a job must, under the same name, or CAF delivers it empty.
void add_tensor_message_type(caf::actor_system_config& cfg);

} // namespace asteroid::actors
