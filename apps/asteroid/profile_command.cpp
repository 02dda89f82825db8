#include "commands.hpp"
#include "number_checks.hpp"

#include "asteroid/actors/remote_probe.hpp"
#include "asteroid/kernels/compute_device.hpp"
#include "asteroid/kernels/cpu_threads.hpp"
#include "asteroid/models/zoo.hpp"
#include "asteroid/planner/json_io.hpp"
#include "asteroid/training/model_options_json.hpp"
#include "asteroid/training/profiler.hpp"
#include "profile_source.hpp"

#include <cstdio>
#include <iostream>

namespace asteroid::apps {

namespace {

struct profile_args {
  std::string model = "cnn";
  std::string options_json;
  std::string batch_sizes = "1,8,32";
  training::profiler_options profiler;
  std::string compute_device = "cpu";
  std::string optimizer = "sgd";
  std::string out;
  int threads = 0;
  std::string node; ///< profile on this node instead of here
  std::string credentials; ///< member folder for --node
};

} // namespace

void add_profile_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
    "profile", "Measure a zoo model layer by layer on this machine and write "
               "a profile for the planner");
  auto a = std::make_shared<profile_args>();
  cmd->add_option("--model,-m", a->model, "Zoo model (see `asteroid models`)")
    ->capture_default_str();
  cmd->add_option("--model-options", a->options_json,
                  "Model options as JSON, e.g. '{\"num_classes\":10,"
                  "\"image_size\":32}'");
  cmd->add_option("--batch-sizes", a->batch_sizes,
                  "Micro-batch sizes to time each layer at")
    ->capture_default_str();
  cmd->add_option("--warmup", a->profiler.warmup, "Untimed runs per size")
    ->check(non_negative_finite())
    ->capture_default_str();
  cmd->add_option("--repeats", a->profiler.repeats,
                  "Timed runs per size (the median is kept)")
    ->check(positive_finite())
    ->capture_default_str();
  cmd->add_option("--slowdown", a->profiler.slowdown,
                  "Emulated slowdown: report times x this factor (recorded as "
                  "emulated in the profile)")
    ->check(positive_finite())
    ->capture_default_str();
  cmd->add_option("--device", a->profiler.device,
                  "Device name or catalog type recorded in the profile")
    ->capture_default_str();
  cmd->add_option("--compute-device", a->compute_device,
                  "Where the layers run here: cpu, cuda, cuda:N or auto (as "
                  "`asteroid node --device`; a node profiles on its own)")
    ->capture_default_str();
  cmd->add_option("--optimizer", a->optimizer,
                  "Optimizer whose state size is recorded: sgd or adam")
    ->check(CLI::IsMember({"sgd", "adam"}))
    ->capture_default_str();
  cmd->add_option("--threads", a->threads,
                  "LibTorch intra-op threads (0: default)")
    ->check(non_negative_finite());
  cmd->add_flag("--inference", a->profiler.forward_only,
                "Time forward passes as an inference stage computes them (eval mode, no "
                "autograd, no backward): a profile for `asteroid serve`'s planner");
  cmd->add_option("--out,-o", a->out, "Write the profile JSON here (default: "
                                      "stdout)");
  cmd->add_option("--node", a->node,
                  "Profile on the node at HOST:PORT (its device and its emulated "
                  "slowdown) instead of on this machine");
  add_credentials_option(cmd, a->credentials);
  cmd->callback([a] {
    if (a->threads > 0)
      kernels::set_cpu_threads(a->threads);
    auto options = a->options_json.empty()
                     ? models::model_options()
                     : training::model_options_from_json(
                       nlohmann::json::parse(a->options_json));
    if (options.seed() < 0)
      options.seed(0);
    auto model = models::make_model(a->model, options);
    a->profiler.batch_sizes = parse_batch_sizes(a->batch_sizes);
    a->profiler.optimizer = training::parse_optimizer(a->optimizer);
    planner::model_profile profile;
    if (a->node.empty()) {
      a->profiler.compute_device = kernels::resolve_compute_device(a->compute_device);
      profile = training::profile_model(model, a->model, a->profiler);
    } else {
      caf::actor_system_config cfg;
      actors::net_options net;
      if (!a->credentials.empty())
        net.tls = actors::credentials::from_folder(a->credentials);
      actors::configure(cfg, net);
      caf::actor_system sys{cfg};
      auto [host, port] = actors::parse_endpoint(a->node);
      auto device = actors::connect_device(sys, host, port, std::chrono::seconds(5));
      auto options_json = a->options_json.empty()
                            ? nlohmann::json::object()
                            : nlohmann::json::parse(a->options_json);
      profile = actors::profile_on_node(sys, device, a->model, options_json,
                                        a->profiler, std::chrono::minutes(10));
    }
    if (a->out.empty()) {
      nlohmann::json j = profile;
      std::cout << j.dump(2) << '\n';
    } else {
      planner::save_model_profile_file(profile, a->out);
      std::fprintf(stderr, "wrote %s (%d layers)\n", a->out.c_str(),
                   profile.num_layers());
    }
  });
}

} // namespace asteroid::apps
