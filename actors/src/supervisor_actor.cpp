// The supervisor actor: the job's state machine and its program-facing
// messages (supervisor_actor.hpp); the step driver is an actor of its own
// (supervisor_engine.cpp) and reports back here.
#include "asteroid/actors/supervisor_actor.hpp"

#include "job_control.hpp"
#include "unexpected.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <thread>

namespace asteroid::actors {

namespace {

using nlohmann::json;

struct supervisor_state {
  std::shared_ptr<detail::job_inputs> inputs;
  std::shared_ptr<detail::job_control> control =
    std::make_shared<detail::job_control>();
  job_state_machine machine;
  caf::actor engine;
  std::vector<caf::actor> subscribers;
  std::vector<caf::typed_response_promise<job_outcome_ptr>> waiting;
  job_outcome_ptr outcome;
  /// What status replies (besides state and stop_requested).
  json progress = json::object();
  /// Devices the step driver added to the job (records "added").
  size_t added = 0;

  ~supervisor_state() {
    // The actor was terminated (an exit message; the step driver holds a
    // handle, so it outlives the program's own): its job ends at the next
    // step boundary instead of running on unsupervised.
    control->stop_requested = true;
  }

  static inline const char* name = "asteroid.supervisor";
};

using supervisor_self = supervisor_actor::stateful_pointer<supervisor_state>;

json state_event(job_state s) {
  return {{"event", "state"}, {"state", to_string(s)}};
}

void publish(supervisor_self self, const std::string& text) {
  for (auto& s : self->state.subscribers)
    caf::anon_send(s, job_event_atom::value, text);
}

void enter(supervisor_self self, job_state to) {
  auto from = self->state.machine.state();
  if (!self->state.machine.advance(to)) {
    spdlog::warn("supervisor: ignored a change of state from {} to {}",
                 to_string(from), to_string(to));
    return;
  }
  publish(self, state_event(to).dump());
}

void finish(supervisor_self self, job_outcome_ptr outcome) {
  auto& st = self->state;
  st.outcome = std::move(outcome);
  if (st.outcome->state == job_state::finished)
    st.progress["step"] = st.outcome->result.steps;
  else
    st.progress["error"] = st.outcome->what;
  enter(self, st.outcome->state);
  for (auto& p : st.waiting)
    p.deliver(st.outcome);
  st.waiting.clear();
}

/// Keeps what status reports from the step driver's records.
void track(supervisor_state& st, const json& rec) {
  auto event = rec.value("event", std::string());
  if (event == "fault" && rec.value("fault", std::string()) == "added") {
    st.added += rec.value("devices", json::array()).size();
  } else if (event == "start") {
    st.progress["steps"] = rec.value("steps", int64_t{0});
  } else if (event == "iteration") {
    st.progress["step"] = rec.value("step", int64_t{0});
    if (rec.contains("loss"))
      st.progress["loss"] = rec["loss"];
  }
}

void start_engine(supervisor_self self) {
  auto& st = self->state;
  st.engine = detail::spawn_supervisor_engine(self->system(), supervisor_actor{self},
                                              st.inputs, st.control);
  self->monitor(st.engine);
}

bool from_engine(supervisor_self self) {
  return self->state.engine
         && self->current_sender()
              == caf::actor_cast<caf::strong_actor_ptr>(self->state.engine);
}

supervisor_actor::behavior_type
supervisor_fun(supervisor_self self, std::shared_ptr<detail::job_inputs> inputs) {
  self->state.inputs = std::move(inputs);
  detail::drop_unexpected(self, "supervisor");
  self->set_down_handler([self](const caf::down_msg& dm) {
    auto& st = self->state;
    if (dm.source == st.engine) {
      if (!st.outcome) {
        auto out = std::make_shared<job_outcome>();
        out->what = "the job's step driver stopped without an outcome ("
                    + caf::to_string(dm.reason) + ")";
        out->error = std::make_exception_ptr(std::runtime_error(out->what));
        finish(self, out);
      }
      return;
    }
    auto& subs = st.subscribers;
    subs.erase(std::remove_if(subs.begin(), subs.end(),
                              [&](const caf::actor& a) {
                                return a.address() == dm.source;
                              }),
               subs.end());
  });
  return {
    [self](job_start_atom) {
      if (self->state.machine.state() != job_state::idle) {
        spdlog::warn("supervisor: ignored a start: the job is {}",
                     to_string(self->state.machine.state()));
        return;
      }
      enter(self, job_state::connecting);
      start_engine(self);
    },
    [self](job_status_atom) -> std::string {
      auto& st = self->state;
      auto status = st.progress;
      status["state"] = to_string(st.machine.state());
      status["stop_requested"] = st.control->stop_requested.load();
      return status.dump();
    },
    [self](job_stop_atom) {
      auto& st = self->state;
      if (is_final(st.machine.state()))
        return;
      st.control->stop_requested = true;
      if (st.machine.state() == job_state::idle) {
        auto out = std::make_shared<job_outcome>();
        out->state = job_state::finished;
        out->result.stopped = true;
        finish(self, out);
      }
    },
    [self](job_subscribe_atom, caf::actor who) {
      if (!who)
        return;
      self->monitor(who);
      self->state.subscribers.push_back(who);
      caf::anon_send(who, job_event_atom::value,
                 state_event(self->state.machine.state()).dump());
    },
    [self](job_await_atom) -> caf::result<job_outcome_ptr> {
      auto& st = self->state;
      if (st.outcome)
        return st.outcome;
      auto promise = self->make_response_promise<job_outcome_ptr>();
      st.waiting.push_back(promise);
      return promise;
    },
    [self](job_remove_atom, int32_t device) -> std::string {
      auto& st = self->state;
      auto state = st.machine.state();
      if (state == job_state::idle || is_final(state))
        return std::string("cannot remove a device from a job that is ")
               + to_string(state);
      auto count = (st.inputs->load ? st.inputs->job.nodes.size()
                                    : st.inputs->devices.size())
                   + st.added;
      if (device < 0 || static_cast<size_t>(device) >= count)
        return "no device " + std::to_string(device) + " in this job (it has "
               + std::to_string(count) + ")";
      st.control->request_removal(device);
      return {};
    },
    [self](job_add_atom, const std::string& endpoint) -> std::string {
      auto& st = self->state;
      auto state = st.machine.state();
      if (state == job_state::idle || is_final(state))
        return std::string("cannot add a node to a job that is ")
               + to_string(state);
      try {
        parse_endpoint(endpoint);
      } catch (const std::exception& e) {
        return e.what();
      }
      st.control->request_addition(endpoint);
      return {};
    },
    [self](job_event_atom, const std::string& text) {
      auto& st = self->state;
      if (!from_engine(self)) {
        spdlog::error("supervisor: ignored an event not from its own job");
        return;
      }
      auto rec = json::parse(text, nullptr, false);
      if (rec.is_discarded())
        return;
      if (rec.value("event", std::string()) == "state") {
        if (auto s = job_state_from_string(rec.value("state", std::string())))
          enter(self, *s);
        return;
      }
      track(st, rec);
      publish(self, text);
    },
    [self](job_outcome_atom, job_outcome_ptr outcome) {
      auto& st = self->state;
      if (!from_engine(self) || !outcome || st.outcome) {
        spdlog::error("supervisor: ignored an outcome not from its own job");
        return;
      }
      finish(self, std::move(outcome));
    },
  };
}

} // namespace

supervisor_actor spawn_supervisor(caf::actor_system& sys, job_spec job,
                                  std::vector<device_actor> devices,
                                  models::sequential_model model,
                                  std::shared_ptr<data::dataset> train,
                                  std::shared_ptr<data::dataset> test) {
  auto in = std::make_shared<detail::job_inputs>();
  in->job = std::move(job);
  in->devices = std::move(devices);
  in->model = std::move(model);
  in->train = std::move(train);
  in->test = std::move(test);
  return sys.spawn(supervisor_fun, std::move(in));
}

supervisor_actor spawn_supervisor(caf::actor_system& sys, job_spec job) {
  auto in = std::make_shared<detail::job_inputs>();
  in->job = std::move(job);
  in->load = true;
  return sys.spawn(supervisor_fun, std::move(in));
}

job_result await_job(caf::actor_system& sys, const supervisor_actor& sup) {
  caf::scoped_actor self{sys};
  job_outcome_ptr outcome;
  std::string failure;
  self->request(sup, caf::infinite, job_await_atom::value)
    .receive([&](const job_outcome_ptr& o) { outcome = o; },
             [&](const caf::error& e) {
               failure = "the supervisor actor did not answer: "
                         + sys.render(e);
             });
  if (!outcome)
    throw std::runtime_error(failure);
  if (outcome->state == job_state::failed)
    std::rethrow_exception(outcome->error);
  return outcome->result;
}

job_result await_job(caf::actor_system& sys, const supervisor_actor& sup,
                     const std::function<bool()>& stop_wanted,
                     std::chrono::milliseconds poll) {
  // Status requests, not an await with a timeout: each timed-out await
  // would leave a promise behind in the supervisor actor. Without a timeout
  // themselves: the supervisor actor is local and event-based, so it
  // answers at once or the request fails at once, and CAF 0.17 would
  // deliver each timed request's timeout after its answer anyway, where
  // this blocking actor would skip it at every receive from then on.
  caf::scoped_actor self{sys};
  bool stop_sent = false;
  for (;;) {
    if (!stop_sent && stop_wanted && stop_wanted()) {
      self->send(sup, job_stop_atom::value);
      stop_sent = true;
    }
    std::string state, failure;
    self->request(sup, caf::infinite, job_status_atom::value)
      .receive(
        [&](const std::string& text) {
          state = json::parse(text).value("state", std::string());
        },
        [&](const caf::error& e) {
          failure = "the supervisor actor did not answer: " + sys.render(e);
        });
    if (!failure.empty())
      throw std::runtime_error(failure);
    if (auto s = job_state_from_string(state); s && is_final(*s))
      return await_job(sys, sup);
    std::this_thread::sleep_for(poll);
  }
}

} // namespace asteroid::actors
