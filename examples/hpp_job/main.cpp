// A hybrid-pipeline training job written against the library API.
//
// It defines its own model (a small MLP built layer by layer) and its own loss
// (cross-entropy with label smoothing), registers both under names so that
// devices can build them, starts three devices inside this process (node
// processes work the same way: `asteroid node` + connect()), writes a plan by
// hand -- stage 0 on one device, stage 1 on two devices with unequal shares of
// every micro-batch -- and trains on a synthetic dataset.
//
// Run: ./example_hpp_job   (exits 1 if the loss does not go down)
#include <asteroid/actors/job.hpp>
#include <asteroid/actors/node.hpp>
#include <asteroid/data/make_dataset.hpp>
#include <asteroid/training/loss.hpp>
#include <asteroid/training/model_registry.hpp>

#include <cstdio>

using namespace asteroid;

// Built for the layers a process asks for: a device that hosts one stage
// constructs only that stage's layers (the others are known by name and
// shape, and their modules are never made); the supervisor asks for all.
models::sequential_model my_model(const nlohmann::json&,
                                  const models::layer_range& layers) {
  namespace nn = torch::nn;
  models::sequential_model m(models::shape_t{1, 8, 8}, torch::kFloat, layers);
  m->push_back("flatten", [] { return nn::AnyModule(nn::Flatten()); }, {64});
  m->push_back("hidden", [] { return nn::AnyModule(nn::Linear(64, 32)); }, {32});
  m->push_back("relu", [] { return nn::AnyModule(nn::ReLU()); }, {32});
  m->push_back("out", [] { return nn::AnyModule(nn::Linear(32, 4)); }, {4});
  return m;
}

// A loss returns the *sum* over the rows it is given: each last-stage replica
// holds only its share of a micro-batch, and the runtime divides by the
// mini-batch size so that the replicas' gradients add up to the mean's.
torch::Tensor smoothed_cross_entropy(const torch::Tensor& output,
                                     const torch::Tensor& target) {
  namespace F = torch::nn::functional;
  return F::cross_entropy(output, target,
                          F::CrossEntropyFuncOptions()
                            .reduction(torch::kSum)
                            .label_smoothing(0.1));
}

int main() {
  // Devices in other processes (`asteroid node`) would need the same two
  // registrations: build them into your own node program.
  training::register_model_factory("my_mlp", &my_model);
  training::register_loss("smoothed_cross_entropy", &smoothed_cross_entropy);

  data::dataset_options d;
  d.count = 512;
  d.shape = {1, 8, 8};
  d.num_classes = 4;
  auto train = data::make_dataset("synthetic-images", d);

  // Three devices in this process; the second stage's pair is 3:1.
  caf::actor_system_config cfg;
  actors::configure(cfg);
  caf::actor_system sys{cfg};
  std::vector<actors::device_actor> devices;
  for (int i = 0; i < 3; ++i) {
    actors::device_options o;
    o.name = "dev" + std::to_string(i);
    devices.push_back(actors::spawn_device(sys, o));
  }

  planner::plan plan;
  plan.batch_size = 32;
  plan.micro_batches = 4;
  plan.stages = {{0, 2, {0}, {8}}, {2, 4, {1, 2}, {6, 2}}};

  actors::job_spec job;
  job.model = "my_mlp";
  job.loss = "smoothed_cross_entropy";
  job.batch_size = plan.batch_size;
  job.micro_batches = plan.micro_batches;
  job.plan = plan;
  job.optimizer.lr = 0.05;
  job.epochs = 3;
  job.progress = 0;
  job.metrics_path = "-";

  torch::manual_seed(1);
  auto result = actors::run_job(sys, job, devices, my_model({}, {}), train, nullptr);
  auto first = result.iterations.front()["loss"].get<double>();
  std::printf("%lld steps, loss %.4f -> %.4f, %.0f samples/s\n",
              static_cast<long long>(result.steps), first, result.last_loss,
              result.samples_per_s);
  for (auto& d : devices)
    caf::anon_send_exit(d, caf::exit_reason::user_shutdown);
  return result.last_loss < first ? 0 : 1;
}
