#pragma once
// What the supervisor actor (supervisor_actor.cpp) shares with the step
// driver it runs on its own thread (supervisor_engine.cpp, supervisor_*.cpp):
// the stop request one way, states and metrics records the other.
#include "asteroid/actors/job.hpp"
#include "asteroid/actors/job_state.hpp"
#include "asteroid/actors/supervisor_actor.hpp"

#include <nlohmann/json.hpp>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace asteroid::actors::detail {

class job_control {
public:
  /// Set by the supervisor actor (stop message, or its own exit); read by
  /// the step driver at each step boundary.
  std::atomic<bool> stop_requested{false};
  /// Called on the step driver's thread as it enters a state ...
  std::function<void(job_state)> on_state;
  /// ... and with every metrics record (its JSON text).
  std::function<void(const std::string&)> on_record;

  void enter(job_state s) const {
    if (on_state)
      on_state(s);
  }

  /// Device indices the program asked to remove, taken by the step driver
  /// at its next step boundary.
  void request_removal(int device) {
    std::lock_guard<std::mutex> guard{mutex_};
    removals_.push_back(device);
    removals_pending_ = true;
  }
  std::vector<int> take_removals() {
    std::lock_guard<std::mutex> guard{mutex_};
    removals_pending_ = false;
    return std::exchange(removals_, {});
  }
  bool removals_pending() const { return removals_pending_.load(); }

  /// Endpoints of nodes the program asked to add, taken by the step driver
  /// at its next step boundary.
  void request_addition(std::string endpoint) {
    std::lock_guard<std::mutex> guard{mutex_};
    additions_.push_back(std::move(endpoint));
    additions_pending_ = true;
  }
  std::vector<std::string> take_additions() {
    std::lock_guard<std::mutex> guard{mutex_};
    additions_pending_ = false;
    return std::exchange(additions_, {});
  }
  bool additions_pending() const { return additions_pending_.load(); }

private:
  std::mutex mutex_;
  std::vector<int> removals_;
  std::atomic<bool> removals_pending_{false};
  std::vector<std::string> additions_;
  std::atomic<bool> additions_pending_{false};
};

/// What the step driver needs. With `load`, it first loads the data and
/// builds the model of `job` and connects to `job.nodes`.
struct job_inputs {
  job_spec job;
  bool load = false;
  std::vector<device_actor> devices;
  models::sequential_model model{nullptr};
  std::shared_ptr<data::dataset> train;
  std::shared_ptr<data::dataset> test;
};

/// Fills `in` from its job spec: datasets (train limited to train_limit, a
/// test split when evaluating) and the model with classes and input shape
/// from the dataset (`in.job.model_options` gains those it lacked).
void load_job_data_and_model(job_inputs& in);

/// load_job_data_and_model, then device handles for `job.nodes`.
void load_job_inputs(caf::actor_system& sys, job_inputs& in);

/// Spawns the step driver: an event-based actor that runs the job
/// (supervisor.hpp) on its fiber and sends `front` its states, records and
/// outcome.
caf::actor spawn_supervisor_engine(caf::actor_system& sys, supervisor_actor front,
                                   std::shared_ptr<job_inputs> in,
                                   std::shared_ptr<job_control> control);

} // namespace asteroid::actors::detail
