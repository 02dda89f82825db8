// `asteroid job --config FILE`: run a hybrid-pipeline job on running nodes.
#include "commands.hpp"
#include "job_signals.hpp"

#include "asteroid/actors/job.hpp"

#include <cstdio>
#include <cstdlib>
#include <memory>

namespace asteroid::apps {

int run_job_file(const std::string& path) {
  return run_job_with_signals(actors::load_job_file(path));
}

void add_job_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
    "job", "Run a hybrid-pipeline training job (job file) on running nodes");
  auto path = std::make_shared<std::string>();
  auto credentials = std::make_shared<std::string>();
  cmd->add_option("--config,-c", *path, "Job file (JSON)")->required();
  add_credentials_option(cmd, *credentials)
    ->description("Member folder of the cluster's credentials this program "
                  "connects to the nodes with (overrides the job file's "
                  "'credentials')");
  cmd->callback([=] {
    auto spec = actors::load_job_file(*path);
    if (!credentials->empty())
      spec.credentials = *credentials;
    if (auto code = run_job_with_signals(spec))
      std::exit(code); // stopped by a signal: 128 + the signal
  });
}

} // namespace asteroid::apps
