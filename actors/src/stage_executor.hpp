#pragma once
// The executor of a replica's instruction stream (the one shipped in its
// spec): a dispatch table from op to handler, after DeepSpeed's pipeline
// engine. The stream is resumable: a handler that needs a message that has
// not arrived says so, and the next message that arrives resumes it at the
// same instruction.
#include "replica_state.hpp"

namespace asteroid::actors::detail {

/// Starts the next step once its start arrived, then executes instructions
/// until one waits for a message or the step ends (report, snapshot, and the
/// next step if its start is already here). Failures are reported to the
/// supervisor (`fail`), never thrown.
void advance(replica_self* self);

/// The replica's reminder for its stream's wait number `wait` arrived:
/// reports the passes not yet reported if that wait still lasts.
void report_if_still_waiting(replica_self* self, int64_t wait);

} // namespace asteroid::actors::detail
