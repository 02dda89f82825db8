#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace asteroid::actors {
struct serve_result;
}

namespace asteroid::apps {

// Each sub-command registers its options and its callback on the main app.
void add_train_command(CLI::App& app);
void add_models_command(CLI::App& app);
void add_devices_command(CLI::App& app);
void add_profile_command(CLI::App& app);
void add_plan_command(CLI::App& app);
void add_schedule_command(CLI::App& app);
void add_node_command(CLI::App& app);
void add_cluster_command(CLI::App& app);
void add_job_command(CLI::App& app);
void add_probe_command(CLI::App& app);
void add_keys_command(CLI::App& app);
void add_serve_command(CLI::App& app);
void add_checkpoint_command(CLI::App& app);
/// `--credentials DIR` of a program that connects to or is a node: the
/// member folder `asteroid keys` wrote (stored in `dir`).
CLI::Option* add_credentials_option(CLI::App* cmd, std::string& dir);
/// `--resume CKPT` of a command that runs a job file (stored in `path`).
CLI::Option* add_resume_option(CLI::App* cmd, std::string& path);
/// Runs a hybrid-pipeline job file (asteroid job --config; train --config),
/// from its checkpoint `resume_from` when that is not empty.
int run_job_file(const std::string& path, const std::string& resume_from = "");
/// Prints what `asteroid serve` served: the stages, throughput, latency.
void print_serve_result(const actors::serve_result& r);

} // namespace asteroid::apps
