// asteroid: train one DNN across a group of heterogeneous edge devices.
//
// Every sub-command is a thin layer over the library; `asteroid <cmd> --help`
// explains its flags.
#include "commands.hpp"

#include "asteroid/kernels/allocator.hpp"

#include <spdlog/spdlog.h>

#include <cstdio>
#include <exception>

int main(int argc, char** argv) {
  asteroid::kernels::keep_tensor_buffers_in_heap();
  CLI::App app{"Asteroid: hybrid pipeline parallel DNN training on "
               "heterogeneous edge devices"};
  app.require_subcommand(1);
  std::string log_level = "info";
  app.add_option("--log-level", log_level,
                 "Log verbosity: trace, debug, info, warn, error, off")
    ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}))
    ->capture_default_str();
  app.parse_complete_callback(
    [&] { spdlog::set_level(spdlog::level::from_str(log_level)); });
  asteroid::apps::add_train_command(app);
  asteroid::apps::add_models_command(app);
  asteroid::apps::add_devices_command(app);
  asteroid::apps::add_profile_command(app);
  asteroid::apps::add_probe_command(app);
  asteroid::apps::add_plan_command(app);
  asteroid::apps::add_schedule_command(app);
  asteroid::apps::add_node_command(app);
  asteroid::apps::add_cluster_command(app);
  asteroid::apps::add_job_command(app);
  asteroid::apps::add_keys_command(app);
  asteroid::apps::add_serve_command(app);
  asteroid::apps::add_checkpoint_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "asteroid: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
