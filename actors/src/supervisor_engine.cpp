// The supervisor actor's step driver: runs a job on its own (detached)
// thread and reports states, records and the outcome to the actor.
#include "job_control.hpp"
#include "supervisor.hpp"

namespace asteroid::actors::detail {

void run_supervisor_engine(caf::blocking_actor* self, supervisor_actor front,
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
  auto out = std::make_shared<job_outcome>();
  try {
    if (in->load)
      load_job_inputs(self->system(), *in);
    supervisor sup{self->system(), in->job, in->devices, in->model,
                   in->train, in->test, control};
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
}

} // namespace asteroid::actors::detail
