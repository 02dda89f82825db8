#include "commands.hpp"

#include "asteroid/actors/remote_probe.hpp"
#include "asteroid/planner/json_io.hpp"

#include <cstdio>
#include <iostream>
#include <memory>

namespace asteroid::apps {

namespace {

struct probe_args {
  std::vector<std::string> nodes;
  int reference = 0;
  int64_t bytes = int64_t{1} << 20;
  int repeats = 3;
  int stream = 0;
  std::string out;
  std::string credentials;
};

} // namespace

void add_probe_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
    "probe", "Measure running nodes (capabilities, bandwidth and latency of "
             "every link) and write a cluster file for `asteroid plan`");
  auto a = std::make_shared<probe_args>();
  cmd->add_option("--nodes", a->nodes, "HOST:PORT of every node")
    ->required()
    ->delimiter(',');
  cmd->add_option("--reference", a->reference,
                  "Index of the node whose speed is 1 (the one profiled)")
    ->capture_default_str();
  cmd->add_option("--bytes", a->bytes, "Payload of the bandwidth probe")
    ->check(CLI::Range(int64_t{1}, int64_t{1} << 30))
    ->capture_default_str();
  cmd->add_option("--repeats", a->repeats, "Round trips per probe (fastest kept)")
    ->check(CLI::Range(1, 100))
    ->capture_default_str();
  cmd->add_option("--stream", a->stream,
                  "Bandwidth from this many payloads of --bytes sent back to "
                  "back instead of from round trips (0: round trips)")
    ->check(CLI::Range(0, 1024))
    ->capture_default_str();
  cmd->add_option("--out,-o", a->out, "Write the cluster JSON here (default: "
                                      "stdout)");
  add_credentials_option(cmd, a->credentials);
  cmd->callback([a] {
    if (a->reference < 0 || a->reference >= static_cast<int>(a->nodes.size()))
      throw CLI::ValidationError("--reference", "must index one of --nodes");
    caf::actor_system_config cfg;
    actors::net_options net;
    if (!a->credentials.empty())
      net.tls = actors::credentials::from_folder(a->credentials);
    actors::configure(cfg, net);
    caf::actor_system sys{cfg};
    auto devices = actors::connect_all(sys, a->nodes, std::chrono::seconds(5));
    actors::link_probe_options lp;
    lp.bytes = a->bytes;
    lp.repeats = a->repeats;
    lp.stream = a->stream;
    if (a->stream * a->bytes > (int64_t{1} << 30))
      throw CLI::ValidationError("--stream", "--stream x --bytes must be at most 1 GiB");
    std::vector<nlohmann::json> caps;
    auto c = actors::measure_cluster(sys, devices, a->nodes, a->reference, lp, &caps);
    for (size_t i = 0; i < caps.size(); ++i) {
      const auto& k = caps[i];
      const auto device = k.value("compute_device", std::string("cpu"));
      // A node older than the `blas` field reports none.
      const auto blas = k.contains("blas") ? ", BLAS " + k.value("blas", std::string()) : "";
      std::fprintf(stderr, "%s at %s: device %s%s, budget %s, %d threads, slowdown %.2f%s\n",
                   k.value("name", a->nodes[i]).c_str(), a->nodes[i].c_str(), device.c_str(),
                   device == "cpu"
                     ? ""
                     : (" (" + k.value("device_name", std::string("?")) + ", "
                        + planner::format_bytes(k.value("device_memory_bytes", int64_t{0})) + ")")
                         .c_str(),
                   planner::format_bytes(k.value("memory_bytes", int64_t{0})).c_str(),
                   k.value("threads", 1), k.value("slowdown", 1.0), blas.c_str());
    }
    for (int i = 0; i < c.size(); ++i)
      for (int j = 0; j < c.size(); ++j)
        if (i != j)
          std::fprintf(stderr, "%s -> %s: %.1f MB/s, %.3f ms\n",
                       c.devices[i].name.c_str(), c.devices[j].name.c_str(),
                       c.bandwidth(i, j) / 1e6, c.latency(i, j) * 1e3);
    nlohmann::json j = c;
    if (a->out.empty()) {
      std::cout << j.dump(2) << '\n';
    } else {
      planner::save_cluster_file(c, a->out);
      std::fprintf(stderr, "wrote %s (%d devices)\n", a->out.c_str(), c.size());
    }
  });
}

} // namespace asteroid::apps
