// `asteroid job --config FILE`: run a hybrid-pipeline job on running nodes.
#include "commands.hpp"

#include "asteroid/actors/job.hpp"

#include <cstdio>
#include <memory>

namespace asteroid::apps {

int run_job_file(const std::string& path) {
  auto r = actors::run_job_file(path);
  std::printf("job done: %lld steps in %.1f s, %.1f samples/s, loss %.4f, "
              "test accuracy %.2f%%\n",
              static_cast<long long>(r.steps), r.seconds, r.samples_per_s,
              r.last_loss, r.test.accuracy * 100);
  return 0;
}

void add_job_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
    "job", "Run a hybrid-pipeline training job (job file) on running nodes");
  auto path = std::make_shared<std::string>();
  cmd->add_option("--config,-c", *path, "Job file (JSON)")->required();
  cmd->callback([=] { run_job_file(*path); });
}

} // namespace asteroid::apps
