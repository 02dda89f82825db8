#pragma once
/// \file
/// Spawning a micro-batch actor (`micro_batch_actor`, protocol.hpp): one per
/// micro-batch of a step, in the supervisor's process. Replicas tell it of
/// each forward and backward pass of their rows; it quits after the last
/// backward pass, and answers `where` (micro_batch_progress::where) until
/// then. docs/runtime.md, "Micro-batch actors", gives its cost.
#include "asteroid/actors/micro_batch_progress.hpp"
#include "asteroid/actors/protocol.hpp"

#include <caf/all.hpp>

namespace asteroid::actors {

micro_batch_actor spawn_micro_batch(caf::actor_system& sys,
                                    micro_batch_route route);

} // namespace asteroid::actors
