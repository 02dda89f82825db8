// A program that drives a training job through its supervisor actor.
//
// It starts three devices in this process (node processes work the same way:
// `asteroid node` on each machine and actors::connect_all here), spawns the
// supervisor actor for a two-stage job, and spawns a listener actor that
// subscribes to the job's records, prints every step and, after N steps,
// tells the supervisor to stop. The job finishes the step that runs,
// gathers its weights and ends `finished` with `stopped` set.
//
// Run: ./example_supervisor_job [N]   (N: steps before the stop, default 5;
//      exits 1 unless the job stopped early after at least N steps)
#include <asteroid/actors/node.hpp>
#include <asteroid/actors/supervisor_actor.hpp>
#include <asteroid/data/make_dataset.hpp>
#include <asteroid/training/model_registry.hpp>

#include <cstdio>
#include <cstdlib>

using namespace asteroid;
using nlohmann::json;

// Prints the job's records and stops the job after `stop_after` steps.
caf::behavior listener(caf::event_based_actor* self,
                       actors::supervisor_actor sup, int64_t stop_after) {
  return {
    [=](actors::job_event_atom, const std::string& text) {
      auto rec = json::parse(text);
      auto event = rec.value("event", std::string());
      if (event == "state") {
        std::printf("job is %s\n", rec["state"].get<std::string>().c_str());
        if (rec["state"] == "finished" || rec["state"] == "failed")
          self->quit();
      } else if (event == "iteration") {
        auto step = rec["step"].get<int64_t>();
        std::printf("step %lld: loss %.4f, %.0f samples/s\n",
                    static_cast<long long>(step), rec["loss"].get<double>(),
                    rec.value("samples_per_s", 0.0));
        if (step == stop_after) {
          std::printf("asking the job to stop\n");
          self->send(sup, actors::job_stop_atom::value);
        }
      }
    },
  };
}

int main(int argc, char** argv) {
  const int64_t stop_after = argc > 1 ? std::atoll(argv[1]) : 5;
  if (stop_after < 1) {
    std::fprintf(stderr, "N must be a positive number of steps\n");
    return 2;
  }
  data::dataset_options d;
  d.count = 64 * 50;
  d.shape = {1, 28, 28};
  d.num_classes = 10;
  auto train = data::make_dataset("synthetic-images", d);

  caf::actor_system_config cfg;
  actors::configure(cfg);
  caf::actor_system sys{cfg};
  std::vector<actors::device_actor> devices;
  for (int i = 0; i < 3; ++i) {
    actors::device_options o;
    o.name = "dev" + std::to_string(i);
    devices.push_back(actors::spawn_device(sys, o));
  }

  // mlp (fc1, fc2, classifier): fc1 and fc2 on devices 0 and 1 (5:3 rows
  // of every micro-batch), the classifier on device 2.
  planner::plan plan;
  plan.batch_size = 64;
  plan.micro_batches = 4;
  plan.stages = {{0, 2, {0, 1}, {10, 6}}, {2, 3, {2}, {16}}};
  actors::job_spec job;
  job.model = "mlp";
  job.batch_size = plan.batch_size;
  job.micro_batches = plan.micro_batches;
  job.plan = plan;
  job.optimizer.lr = 0.05;
  job.epochs = 1;
  job.progress = 0;

  torch::manual_seed(1);
  auto sup = actors::spawn_supervisor(sys, job, devices,
                                      training::build_model("mlp", json::object()),
                                      train, nullptr);
  auto watcher = sys.spawn(listener, sup, stop_after);
  caf::anon_send(sup, actors::job_subscribe_atom::value, watcher);
  caf::anon_send(sup, actors::job_start_atom::value);

  int rc = 0;
  try {
    // The program's edge: wait here for the job's outcome.
    auto result = actors::await_job(sys, sup);
    std::printf("%s after %lld of %lld steps, loss %.4f\n",
                result.stopped ? "stopped" : "finished",
                static_cast<long long>(result.steps),
                static_cast<long long>(train->size() / plan.batch_size),
                result.last_loss);
    rc = result.stopped && result.steps >= stop_after ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "job failed: %s\n", e.what());
    rc = 1;
  }
  for (auto& dev : devices)
    caf::anon_send_exit(dev, caf::exit_reason::user_shutdown);
  return rc;
}
