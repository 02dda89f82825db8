#pragma once
// The job a benchmark runs to measure the framework, not to train a model.
#include "asteroid/actors/job.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace asteroid::bench {

/// `steps` steps of `model` under `plan` on `nodes`: SGD (lr 0.02, momentum
/// 0.9), seed 1, no evaluation and no progress line, so that what is timed
/// or measured is the steps alone.
inline actors::job_spec measuring_job(const std::string& model, const planner::plan& plan,
                                      int64_t steps, std::vector<std::string> nodes) {
  actors::job_spec job;
  job.model = model;
  job.batch_size = plan.batch_size;
  job.micro_batches = plan.micro_batches;
  job.optimizer.lr = 0.02;
  job.optimizer.momentum = 0.9;
  job.max_steps = steps;
  job.evaluate = false;
  job.progress = 0;
  job.seed = 1;
  job.nodes = std::move(nodes);
  job.plan = plan;
  return job;
}

} // namespace asteroid::bench
