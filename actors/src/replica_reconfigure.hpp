#pragma once
// A replica that stays where it is across a recovery: its layers, weights
// and optimizer state are kept, everything that depends on the plan around
// it (stage index, shares, neighbours, ring, stream, generation) is
// replaced. The supervisor keeps every replica whose device survived and
// whose layer range the new plan gives to that device again, instead of
// stopping it and building it anew.
#include "replica_state.hpp"

namespace asteroid::actors::detail {

/// Derives from `e.spec` what the engine computes per deployment: first and
/// last stage, the loss, the row spans of this replica and its neighbours.
/// Throws std::invalid_argument for an unknown loss.
void apply_spec(engine& e);

/// Why `next` cannot replace the running spec (empty: it can): another
/// model, layer range or optimizer would need other state.
std::string reconfigure_problem(const replica_spec& running,
                                const replica_spec& next);

/// Replaces the spec and forgets everything of the deployment before: the
/// step in progress, buffered tensors, starts, credits, peers and channels
/// but the home device's (the supervisor sends the new ones next). The
/// emulated slowdown stays (it is the device's). The next step snapshots
/// again, to the new backup.
void reconfigure(replica_self* self, replica_spec next);

} // namespace asteroid::actors::detail
