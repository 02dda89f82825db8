// `asteroid job --config FILE`: run a hybrid-pipeline job on running nodes.
#include "commands.hpp"
#include "job_signals.hpp"

#include "asteroid/actors/job.hpp"

#include <cstdio>
#include <cstdlib>
#include <memory>

namespace asteroid::apps {

int run_job_file(const std::string& path, const std::string& resume_from) {
  auto spec = actors::load_job_file(path);
  spec.resume_from = resume_from;
  return run_job_with_signals(spec);
}

CLI::Option* add_resume_option(CLI::App* cmd, std::string& path) {
  return cmd
    ->add_option("--resume", path,
                 "Go on from this checkpoint of the same job (its "
                 "fault_tolerance.checkpoint file, written every "
                 "checkpoint_every steps and at the end): from the step it "
                 "holds, with its weights and optimizer state, on these or "
                 "other nodes")
    ->check(CLI::ExistingFile);
}

void add_job_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
    "job", "Run a hybrid-pipeline training job (job file) on running nodes");
  auto path = std::make_shared<std::string>();
  auto credentials = std::make_shared<std::string>();
  auto resume = std::make_shared<std::string>();
  cmd->add_option("--config,-c", *path, "Job file (JSON)")->required();
  add_resume_option(cmd, *resume);
  add_credentials_option(cmd, *credentials)
    ->description("Member folder of the cluster's credentials this program "
                  "connects to the nodes with (overrides the job file's "
                  "'credentials')");
  cmd->callback([=] {
    auto spec = actors::load_job_file(*path);
    if (!credentials->empty())
      spec.credentials = *credentials;
    spec.resume_from = *resume;
    if (auto code = run_job_with_signals(spec))
      std::exit(code); // stopped by a signal: 128 + the signal
  });
}

} // namespace asteroid::apps
