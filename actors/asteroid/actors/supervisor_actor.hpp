#pragma once
/// \file
/// The supervisor actor: a job as an actor that a program spawns and talks
/// to. It hosts the planner and the step driver (supervisor_*.cpp), keeps
/// the job's state machine (job_state.hpp) and hands every metrics record
/// to its subscribers. `run_job` and the `asteroid job` / `asteroid cluster
/// --job` commands are thin clients of it: spawn, start, await.
///
///     auto sup = actors::spawn_supervisor(sys, job, devices, model, train, test);
///     self->send(sup, actors::job_subscribe_atom::value, my_listener);
///     self->send(sup, actors::job_start_atom::value);
///     ...                    // my_listener gets (ast_jevent, json text)
///     self->send(sup, actors::job_stop_atom::value);  // after the running step
///     auto result = actors::await_job(sys, sup);      // or request ast_jwait
///
/// Its messages (compiler-checked through `supervisor_actor`):
/// - `ast_jstart`: connect, plan, deploy and run (once; later starts are
///   logged and ignored). Subscribe first to see every event.
/// - `ast_jstat` -> JSON text: {"state", "step" (steps done), "steps" (of
///   the job, once known), "loss", "stop_requested", "error" when failed}.
/// - `ast_jstop`: finish after the step that runs (a step already started
///   ahead runs too) and gather the weights, without evaluating: the job
///   ends `finished` with `result.stopped`. Before start: finished at once, no step run.
/// - `ast_jsub, actor`: the actor gets `(ast_jevent, std::string)` for
///   every record the metrics file gets (start, links, iteration, fault,
///   done: docs/runtime.md "One iteration") and {"event": "state", "state": ...}
///   at each change of state, beginning with the current one. Subscribers
///   are monitored and dropped when they go down.
/// - `ast_jwait` -> job_outcome_ptr: replied once the job is final.
/// - `ast_jdrop, int32 device` -> error text ("": accepted): takes the
///   device (its index in the job's devices or nodes) out of the job at the
///   next step boundary: its replicas' state is gathered, the plan patched
///   around it and deployed (event "removed"; replicas elsewhere that keep
///   their layers keep running), it is released (drops the job's
///   snapshots, free for another job) and is not admitted again. Refused before start, after the end, for an index out
///   of range, and (event "remove_refused") when no device would be left.
/// - `ast_jadd, string endpoint` -> error text ("": accepted): adds the node
///   at "host:port" (`asteroid node --listen`) at the next step boundary:
///   the supervisor connects to it, reads its capabilities, links it with
///   every live node (and measures those links when the job measured its
///   links), the state after the last step is gathered and a fresh plan on
///   the live devices, the new one included, is deployed (event "added",
///   with the new device's index). Refused at once before start, after the
///   end, for text that is not host:port; at the boundary (event
///   "add_refused", the job runs on) when the job cannot plan (a fixed plan
///   and no planner or profile), the endpoint is already one of the job's
///   nodes, or the node cannot be reached or linked.
/// The job also stops at its next step boundary when the supervisor actor is
/// terminated (an exit message). Dropping the program's handle does not end
/// it: the step driver holds one until the job is final.
#include "asteroid/actors/job.hpp"
#include "asteroid/actors/job_state.hpp"
#include "asteroid/actors/protocol.hpp"

#include <caf/allowed_unsafe_message_type.hpp>

#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace asteroid::actors {

using job_start_atom = caf::atom_constant<caf::atom("ast_jstart")>;
using job_status_atom = caf::atom_constant<caf::atom("ast_jstat")>;
using job_stop_atom = caf::atom_constant<caf::atom("ast_jstop")>;
using job_subscribe_atom = caf::atom_constant<caf::atom("ast_jsub")>;
using job_event_atom = caf::atom_constant<caf::atom("ast_jevent")>;
using job_await_atom = caf::atom_constant<caf::atom("ast_jwait")>;
using job_outcome_atom = caf::atom_constant<caf::atom("ast_jdone")>;
using job_remove_atom = caf::atom_constant<caf::atom("ast_jdrop")>;
using job_add_atom = caf::atom_constant<caf::atom("ast_jadd")>;

/// How a job ended.
struct job_outcome {
  job_state state = job_state::failed; ///< finished or failed
  job_result result;                   ///< when finished
  std::exception_ptr error;            ///< when failed: what run_job throws
  std::string what;                    ///< the error's message
};
/// Shared and immutable, so every waiter gets the same outcome without a copy
/// of the model. It never leaves the process (the supervisor actor is local
/// to the program that spawned it).
using job_outcome_ptr = std::shared_ptr<const job_outcome>;

} // namespace asteroid::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(asteroid::actors::job_outcome_ptr)

namespace asteroid::actors {

using supervisor_actor = caf::typed_actor<
  caf::reacts_to<job_start_atom>,
  caf::replies_to<job_status_atom>::with<std::string>,
  caf::reacts_to<job_stop_atom>,
  caf::reacts_to<job_subscribe_atom, caf::actor>,
  caf::replies_to<job_await_atom>::with<job_outcome_ptr>,
  caf::replies_to<job_remove_atom, int32_t>::with<std::string>,
  caf::replies_to<job_add_atom, std::string>::with<std::string>,
  /// From the supervisor's own step driver (others are logged and
  /// dropped): a metrics record or a change of state, as JSON text ...
  caf::reacts_to<job_event_atom, std::string>,
  /// ... and how the job ended.
  caf::reacts_to<job_outcome_atom, job_outcome_ptr>>;

/// A supervisor for `job` on `devices` (handles from `connect_all` or
/// `spawn_device`), starting from the weights of `model` and reading `train`
/// (`test` may be null). Nothing runs before `ast_jstart`.
supervisor_actor spawn_supervisor(caf::actor_system& sys, job_spec job,
                                  std::vector<device_actor> devices,
                                  models::sequential_model model,
                                  std::shared_ptr<data::dataset> train,
                                  std::shared_ptr<data::dataset> test);

/// A supervisor for a job file's job: once started it loads the data, builds
/// the model and connects to `job.nodes` (state `connecting`; an unreachable
/// node fails the job, naming it).
supervisor_actor spawn_supervisor(caf::actor_system& sys, job_spec job);

/// Waits for `sup`'s job to end (a program's edge: this blocks the calling
/// thread) and returns its result, or throws what failed it.
job_result await_job(caf::actor_system& sys, const supervisor_actor& sup);

/// As await_job, and asks `stop_wanted` every `poll` while the job runs: the
/// first time it returns true the job is sent a stop (`ast_jstop`: it ends
/// after the running step, `result.stopped`). For a program's edge that
/// turns Ctrl-C into a stop (`asteroid job`, `asteroid cluster --job`).
job_result await_job(caf::actor_system& sys, const supervisor_actor& sup,
                     const std::function<bool()>& stop_wanted,
                     std::chrono::milliseconds poll = std::chrono::milliseconds(100));

} // namespace asteroid::actors
