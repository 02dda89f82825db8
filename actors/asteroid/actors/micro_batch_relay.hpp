#pragma once
/// \file
/// Spawning the job's micro-batch relay (`micro_batch_relay_actor`,
/// protocol.hpp): the one actor the replicas report their passes to, in the
/// supervisor's process, which tells each pass to its micro-batch's actor
/// (micro_batch.hpp). docs/runtime.md, "Micro-batch actors", says why.
#include "asteroid/actors/protocol.hpp"

#include <caf/all.hpp>

namespace asteroid::actors {

micro_batch_relay_actor spawn_micro_batch_relay(caf::actor_system& sys);

} // namespace asteroid::actors
