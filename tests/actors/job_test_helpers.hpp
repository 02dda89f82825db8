#pragma once
// Helpers shared by the runtime and fault-tolerance tests: synthetic data,
// the single-device reference run, plans, jobs and local clusters.
#include "in_process.hpp"

#include "asteroid/actors/job.hpp"
#include "asteroid/actors/node.hpp"
#include "asteroid/actors/replica_spec.hpp"
#include "asteroid/planner/given_plan.hpp"
#include "asteroid/data/make_dataset.hpp"
#include "asteroid/data/sampler.hpp"
#include "asteroid/training/loss.hpp"
#include "asteroid/training/model_registry.hpp"
#include "asteroid/training/optimizer.hpp"

#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

namespace asteroid::test {

using nlohmann::json;

inline std::shared_ptr<data::dataset> synthetic(int64_t count) {
  data::dataset_options o;
  o.count = count;
  o.shape = {1, 28, 28};
  o.num_classes = 10;
  o.seed = 7;
  return data::make_dataset("synthetic-images", o);
}

inline models::sequential_model fresh_model(const std::string& name, uint64_t seed,
                                            const json& options = json::object()) {
  torch::manual_seed(seed);
  return training::build_model(name, options);
}

/// Single-device training on the same data order and loss. `accumulate` > 1 runs each
/// mini-batch as that many micro-batches with summed gradients (what the
/// pipeline does, which only matters for BatchNorm).
inline models::sequential_model reference(const actors::job_spec& job,
                                   const data::dataset& train,
                                   int accumulate = 1) {
  auto model = fresh_model(job.model, job.seed, job.model_options);
  model->train();
  auto opt = training::make_optimizer(job.optimizer, model->parameters());
  data::sampler order{train.size(), job.seed};
  int64_t step = 0;
  for (int64_t epoch = 0; step < job.max_steps; ++epoch)
    for (auto& idx : order.batches(epoch, job.batch_size, true)) {
      if (step++ >= job.max_steps)
        break;
      auto b = train.get_batch(idx);
      opt->zero_grad();
      auto mbs = job.batch_size / accumulate;
      for (int m = 0; m < accumulate; ++m) {
        auto out = model->forward(b.inputs.slice(0, m * mbs, (m + 1) * mbs));
        auto loss = training::find_loss(job.loss)(
                      out, b.targets.slice(0, m * mbs, (m + 1) * mbs))
                    / static_cast<double>(job.batch_size);
        loss.backward();
      }
      opt->step();
    }
  return model;
}

inline double max_abs_diff(const models::sequential_model& a,
                    const models::sequential_model& b) {
  auto sa = a->range_state(0), sb = b->range_state(0);
  REQUIRE(sa.size() == sb.size());
  double worst = 0;
  for (size_t i = 0; i < sa.size(); ++i) {
    REQUIRE(sa[i].first == sb[i].first);
    worst = std::max(worst, (sa[i].second.to(torch::kDouble)
                             - sb[i].second.to(torch::kDouble))
                              .abs()
                              .max()
                              .item<double>());
  }
  return worst;
}

inline planner::plan make_plan(int64_t batch, int micro,
                        std::vector<planner::stage_plan> stages) {
  return planner::given_plan("test", batch, micro, std::move(stages));
}

inline actors::job_spec base_job(const std::string& model, planner::plan p) {
  actors::job_spec job;
  job.model = model;
  job.batch_size = p.batch_size;
  job.micro_batches = p.micro_batches;
  job.optimizer.lr = 0.05;
  job.optimizer.momentum = 0.9;
  job.max_steps = 20;
  job.seed = 3;
  job.plan = p;
  job.evaluate = false;
  job.progress = 0;
  job.step_timeout_ms = 30000;
  return job;
}

/// The spec of the 3-layer mlp of job `job` as one stage on one device with
/// batch 8 (a caller sets its instruction stream).
inline actors::replica_spec one_stage_mlp_spec(int64_t job) {
  actors::replica_spec spec;
  spec.model = "mlp";
  spec.model_options = json::object();
  spec.first_layer = 0;
  spec.end_layer = 3;
  spec.batch_size = 8;
  spec.shares = {8};
  spec.job = job;
  return spec;
}

inline actors::local_cluster::options cluster_options(int nodes, uint16_t port) {
  actors::local_cluster::options o;
  o.exe = ASTEROID_CLI_PATH;
  if (o.exe.empty())
    FAIL("the asteroid program (target asteroid_cli) is not part of this build");
  o.nodes = nodes;
  o.base_port = port;
  o.log_dir = std::string(ASTEROID_TEST_TMP) + "/actors-" + std::to_string(port);
  return o;
}

inline actors::job_result run_on_cluster(actors::job_spec job,
                                  const actors::local_cluster& cluster,
                                  std::shared_ptr<data::dataset> train) {
  job.nodes = cluster.endpoints();
  caf::actor_system_config cfg;
  actors::configure(cfg);
  caf::actor_system sys{cfg};
  auto devices = actors::connect_all(sys, job.nodes, std::chrono::seconds(3));
  return actors::run_job(sys, job, devices,
                         fresh_model(job.model, job.seed, job.model_options), train,
                         nullptr);
}

inline std::string slurp(const std::string& path) {
  std::ifstream in{path};
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// The records of `event` in a metrics file (JSON lines).
inline std::vector<nlohmann::json> records_of(const std::string& path,
                                              const std::string& event) {
  std::vector<nlohmann::json> out;
  std::ifstream in{path};
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.value("event", "") == event)
      out.push_back(std::move(j));
  }
  return out;
}

} // namespace asteroid::test
