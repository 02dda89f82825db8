#include "asteroid/actors/job.hpp"

#include "job_control.hpp"

#include "asteroid/actors/node.hpp"
#include "asteroid/actors/supervisor_actor.hpp"
#include "asteroid/data/make_dataset.hpp"
#include "asteroid/training/model_registry.hpp"

namespace asteroid::actors {

namespace detail {

void load_job_data_and_model(job_inputs& in) {
  auto& job = in.job;
  // -- data --
  data::dataset_options dopts;
  dopts.path = job.data_dir;
  dopts.count = job.synthetic_count;
  dopts.seed = job.seed;
  auto train = data::make_dataset(job.dataset, dopts);
  std::shared_ptr<data::dataset> test;
  if (job.evaluate) {
    auto topts = dopts;
    topts.split = data::split::test;
    topts.seed = job.seed + 1;
    topts.count = std::max<int64_t>(job.synthetic_count / 4, 1);
    test = data::make_dataset(job.dataset, topts);
  }
  if (job.train_limit > 0 && job.train_limit < train->size()) {
    auto b = train->get_range(0, job.train_limit);
    train = std::make_shared<data::tensor_dataset>(
      b.inputs, b.targets, train->num_classes(), train->name());
  }
  // -- model: the dataset decides classes and input shape --
  auto shape = train->sample_shape();
  if (!job.model_options.contains("num_classes"))
    job.model_options["num_classes"] = train->num_classes();
  // Fewer outputs than classes fails in the last stage's loss, on a node,
  // with an index error; said here it names the two numbers.
  const auto classes = job.model_options["num_classes"];
  if (classes.is_number_integer() && classes.get<int64_t>() < train->num_classes())
    throw std::invalid_argument("model_options.num_classes " + classes.dump()
                                + " is fewer than the " + std::to_string(train->num_classes())
                                + " classes of dataset '" + job.dataset + "'");
  if (shape.size() == 3) {
    if (!job.model_options.contains("in_channels"))
      job.model_options["in_channels"] = shape[0];
    if (!job.model_options.contains("image_size"))
      job.model_options["image_size"] = shape[1];
  }
  torch::manual_seed(job.seed);
  in.model = training::build_model(job.model, job.model_options);
  in.train = std::move(train);
  in.test = std::move(test);
}

void load_job_inputs(caf::actor_system& sys, job_inputs& in) {
  load_job_data_and_model(in);
  in.devices = connect_all(sys, in.job.nodes,
                           std::chrono::milliseconds(in.job.connect_timeout_ms));
}

} // namespace detail

net_options net_of(const job_spec& job) {
  net_options net;
  if (!job.credentials.empty())
    net.tls = credentials::from_folder(job.credentials);
  return net;
}

job_result run_job(caf::actor_system& sys, const job_spec& job,
                   const std::vector<device_actor>& devices,
                   models::sequential_model model,
                   std::shared_ptr<data::dataset> train,
                   std::shared_ptr<data::dataset> test) {
  auto sup = spawn_supervisor(sys, job, devices, std::move(model),
                              std::move(train), std::move(test));
  caf::anon_send(sup, job_start_atom::value);
  return await_job(sys, sup);
}

job_result run_job(const job_spec& job) {
  return run_job(job, nullptr);
}

job_result run_job(const job_spec& job, const std::function<bool()>& stop_wanted) {
  caf::actor_system_config cfg;
  configure(cfg, net_of(job));
  caf::actor_system sys{cfg};
  auto sup = spawn_supervisor(sys, job);
  caf::anon_send(sup, job_start_atom::value);
  return stop_wanted ? await_job(sys, sup, stop_wanted) : await_job(sys, sup);
}

job_result run_job_file(const std::string& path) {
  return run_job(load_job_file(path));
}

} // namespace asteroid::actors
