// The supervisor actor's step driver: an event-based actor whose fiber runs
// a job (supervisor.hpp) and reports states, records and the outcome to the
// supervisor actor.
#include "fiber_inbox.hpp"
#include "job_control.hpp"
#include "supervisor.hpp"

#include <memory>

namespace asteroid::actors::detail {

namespace {

struct engine_state {
  std::unique_ptr<fiber_inbox> inbox;
  static inline const char* name = "asteroid.step_driver";
};

using engine_self = caf::stateful_actor<engine_state>*;

/// Runs on the fiber: the job, start to end, and its outcome to `front`.
void drive(engine_self self, const supervisor_actor& front, job_inputs& in,
           const std::shared_ptr<job_control>& control) {
  auto out = std::make_shared<job_outcome>();
  try {
    if (in.load) // reads files and connects to the nodes: blocking calls
      self->state.inbox->run_aside([&] { load_job_inputs(self->system(), in); });
    supervisor sup{self, *self->state.inbox, in.job, in.devices, in.model,
                   in.train, in.test, control};
    out->result = sup.run();
    out->state = job_state::finished;
  } catch (const std::exception& e) {
    out->state = job_state::failed;
    out->error = std::current_exception();
    out->what = e.what();
  } catch (...) {
    out->state = job_state::failed;
    out->error = std::current_exception();
    out->what = "unknown error";
  }
  control->on_state = nullptr;
  control->on_record = nullptr;
  self->send(front, job_outcome_atom::value, job_outcome_ptr{std::move(out)});
  self->quit();
}

caf::behavior engine_fun(engine_self self, supervisor_actor front,
                         std::shared_ptr<job_inputs> in,
                         std::shared_ptr<job_control> control) {
  // Everything goes to the supervisor actor as messages from this actor, so
  // it arrives in order (the outcome after the last record) and the actor
  // can tell its own step driver's messages from anyone else's.
  control->on_state = [self, front](job_state s) {
    self->send(front, job_event_atom::value,
               nlohmann::json{{"event", "state"}, {"state", to_string(s)}}.dump());
  };
  control->on_record = [self, front](const std::string& line) {
    self->send(front, job_event_atom::value, line);
  };
  self->state.inbox = std::make_unique<fiber_inbox>(
    self, [self, front, in, control] { drive(self, front, *in, control); });
  // An exit message ends the job at its next step boundary instead (the
  // supervisor actor does the same when it goes away): quitting now would
  // leave its replicas running on the nodes.
  self->set_exit_handler([control](caf::exit_msg&) { control->stop_requested = true; });
  return self->state.inbox->behavior();
}

} // namespace

caf::actor spawn_supervisor_engine(caf::actor_system& sys, supervisor_actor front,
                                   std::shared_ptr<job_inputs> in,
                                   std::shared_ptr<job_control> control) {
  // On the scheduler, not detached. CAF 0.17 keeps an ended actor's object
  // alive while any message naming it lingers, and an actor system's
  // destructor waits for a detached actor's object to go after it stopped
  // the clock: a detached driver hung about one program exit in three in
  // the compression test, held (gdb) by deployment messages naming it that
  // were still queued, most likely at a stage actor that had quit and was
  // kept by its request's timeout. Its blocking calls go aside (fiber_inbox::run_aside);
  // what it computes between waits (planning, gathering a model's state)
  // takes one scheduler thread meanwhile.
  return sys.spawn(engine_fun, std::move(front), std::move(in), std::move(control));
}

} // namespace asteroid::actors::detail
