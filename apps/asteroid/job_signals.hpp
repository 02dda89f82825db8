#pragma once
// Ctrl-C and SIGTERM while a job runs or a model is served from the command
// line (`asteroid job`, `asteroid serve`, `asteroid cluster --job|--serve`).
#include "asteroid/actors/job.hpp"
#include "asteroid/actors/serve.hpp"

namespace asteroid::apps {

/// Runs `job` and prints its result line. While it runs, the first SIGINT or
/// SIGTERM stops it after its running step (the weights are gathered and, if
/// the job evaluates, evaluated, as at its end); a second one ends the
/// process at once. The previous handlers are restored after. Returns the
/// exit code: 0, or 128 + the signal when a signal stopped the job.
int run_job_with_signals(const actors::job_spec& job);

/// Serves `spec` and prints what was served. The first SIGINT or SIGTERM
/// stops the server (requests not answered yet fail), a second one ends the
/// process at once. Returns 0, or 128 + the signal.
int run_serve_with_signals(const actors::serve_spec& spec);

} // namespace asteroid::apps
