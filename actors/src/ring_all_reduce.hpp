#pragma once
// The ALLREDUCE instruction: a ring all-reduce of a stage's gradients over
// its group (reduce-scatter, then all-gather; 2(n-1) chunks of 1/n of the
// gradient), ring order = replica order. Every chunk is summed on one replica
// and copied to the others, so the replicas stay bit-identical.
#include "replica_state.hpp"

namespace asteroid::actors::detail {

/// Runs the all-reduce as far as the chunks received allow; resumable:
/// returns false while it waits for a chunk (the caller calls it again when
/// one arrives), true when the gradients hold the group's sum.
bool all_reduce(replica_self* self);

} // namespace asteroid::actors::detail
