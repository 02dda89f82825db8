// `asteroid node` (one device) and `asteroid cluster` (N local devices).
#include "commands.hpp"
#include "number_checks.hpp"
#include "job_signals.hpp"

#include "asteroid/actors/job.hpp"
#include "asteroid/actors/serve.hpp"
#include "asteroid/actors/server.hpp"
#include "asteroid/actors/node.hpp"
#include "asteroid/kernels/compute_device.hpp"
#include "asteroid/planner/json_io.hpp"

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <thread>
#include <unistd.h>

namespace asteroid::apps {

namespace {

std::atomic<int> cluster_signal{0};
extern "C" void on_cluster_signal(int sig) { cluster_signal = sig; }

template <class T>
std::vector<T> parse_list(const std::string& text, const char* what,
                          T (*conv)(const std::string&)) {
  std::vector<T> out;
  std::stringstream in{text};
  std::string item;
  while (std::getline(in, item, ','))
    try {
      out.push_back(conv(item));
    } catch (const std::exception& e) {
      throw std::invalid_argument(std::string(what) + ": bad item '" + item
                                  + "': " + e.what());
    }
  return out;
}

void print_nodes(const actors::local_cluster& cluster) {
  for (size_t i = 0; i < cluster.endpoints().size(); ++i)
    std::printf("node%zu: %s (pid %d, log %s)\n", i,
                cluster.endpoints()[i].c_str(), cluster.pids()[i],
                cluster.log_path(static_cast<int>(i)).c_str());
  std::fflush(stdout);
}

double to_double(const std::string& s) { return std::stod(s); }
/// Checked here, so that a bad name fails before any node starts.
std::string to_device_name(const std::string& s) {
  kernels::resolve_compute_device(s);
  return s;
}
int64_t to_memory(const std::string& s) {
  return planner::parse_memory_size(nlohmann::json(s), "--memory");
}

} // namespace

void add_node_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
    "node", "Run one device: publish a device actor and host stage replicas");
  auto o = std::make_shared<actors::node_options>();
  auto listen = std::make_shared<std::string>("127.0.0.1:4200");
  auto memory = std::make_shared<std::string>("4GiB");
  cmd->add_option("--listen", *listen, "HOST:PORT to publish the device at")
    ->capture_default_str();
  cmd->add_option("--name", o->device.name, "Device name")->capture_default_str();
  cmd->add_option("--memory", *memory, "Memory budget (e.g. 4GiB)")
    ->capture_default_str();
  cmd->add_option("--threads", o->device.threads, "LibTorch threads")
    ->capture_default_str();
  cmd->add_option("--slowdown", o->device.slowdown,
                  "Emulated slowdown factor (compute padded to F x measured)")
    ->capture_default_str();
  cmd->add_option("--device", o->device.compute_device,
                  "Where replicas compute: cpu, cuda (device 0), cuda:N, or auto "
                  "(the first CUDA device when this build and machine have one)")
    ->capture_default_str();
  cmd->add_option("--link-interface", o->device.link_interface,
                  "Interface outside this node's network namespace that "
                  "carries all its traffic (the testbed's host-side veth); "
                  "'cut' and 'heal' faults take it down and up");
  auto no_data_plane = std::make_shared<bool>(false);
  auto data_port = std::make_shared<int>(0);
  auto link_mbit = std::make_shared<double>(0);
  cmd->add_flag("--no-data-plane", *no_data_plane,
                "Send tensors in CAF messages instead of on the data plane");
  cmd->add_option("--data-port", *data_port,
                  "Port of the data plane (0: any free one, reported to the "
                  "supervisor)")
    ->check(CLI::Range(0, 65535))
    ->capture_default_str();
  cmd->add_option("--link-rate", *link_mbit,
                  "Pace outgoing tensor bytes to this many Mbit/s (emulated "
                  "link, for when tc shaping is not available; 0: off)")
    ->check(non_negative_finite())
    ->capture_default_str();
  auto credentials = std::make_shared<std::string>();
  add_credentials_option(cmd, *credentials);
  cmd->add_flag("--insecure", o->insecure,
                "Listen on a non-loopback address without credentials: "
                "anyone who reaches it can drive this node (warned at start)");
  cmd->callback([=] {
    if (!credentials->empty())
      o->net.tls = actors::credentials::from_folder(*credentials);
    auto [host, port] = actors::parse_endpoint(*listen);
    o->data_plane = !*no_data_plane;
    o->data_port = static_cast<uint16_t>(*data_port);
    o->link_rate_Bps = *link_mbit * 1e6 / 8;
    o->host = host;
    o->port = port;
    o->device.endpoint = *listen;
    o->device.memory_bytes = to_memory(*memory);
    std::exit(actors::run_node(*o));
  });
}

void add_cluster_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
    "cluster", "Start N local node processes on loopback (Ctrl-C stops "
               "them), optionally run a job on them");
  auto o = std::make_shared<actors::local_cluster::options>();
  auto slowdown = std::make_shared<std::string>();
  auto memory = std::make_shared<std::string>();
  auto job = std::make_shared<std::string>();
  auto resume = std::make_shared<std::string>();
  auto base_port = std::make_shared<int>(27000);
  cmd->add_option("--nodes,-n", o->nodes, "Number of nodes")
    ->capture_default_str();
  cmd->add_option("--base-port", *base_port, "Node i listens on PORT+i")
    ->check(CLI::Range(1, 65535))
    ->capture_default_str();
  cmd->add_option("--slowdown", *slowdown,
                  "Emulated slowdowns, one for all or one per node: 1,1,2,2");
  cmd->add_option("--memory", *memory,
                  "Memory budgets, one for all or one per node: 2GiB,1GiB");
  cmd->add_option("--threads", o->threads, "LibTorch threads per node")
    ->capture_default_str();
  auto devices = std::make_shared<std::string>();
  cmd->add_option("--device", *devices,
                  "Where each node computes, one for all or one per node: "
                  "cpu,cuda:0 (as `asteroid node --device`; default cpu)");
  cmd->add_option("--link-rate", o->link_rates_mbps,
                  "Nodes pace their outgoing tensor bytes to this many Mbit/s, "
                  "one for all or one per node: 100,100,10 (emulated links on "
                  "loopback; 0: unpaced, the default)")
    ->delimiter(',')
    ->check(non_negative_finite());
  cmd->add_option("--log-dir", o->log_dir,
                  "Folder for the nodes' logs; without it, a temporary folder "
                  "removed at exit unless the job failed");
  auto plain = std::make_shared<bool>(false);
  cmd->add_flag("--no-tls", *plain,
                "Plain TCP on loopback without credentials (to compare with the "
                "default: throw-away credentials, every connection TLS)");
  cmd->add_option("--job", *job,
                  "Run this job file on the nodes (its 'nodes' are replaced), "
                  "then stop them");
  add_resume_option(cmd, *resume)->needs("--job");
  auto serve = std::make_shared<std::string>();
  cmd->add_option("--serve", *serve,
                  "Serve this serve file's model on the nodes (its 'nodes' are "
                  "replaced), then stop them")
    ->excludes("--job");
  cmd->callback([=] {
    o->exe = "/proc/self/exe";
    char buf[4096];
    auto n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
    if (n > 0)
      o->exe.assign(buf, static_cast<size_t>(n));
    if (o->nodes > 65535 || *base_port + o->nodes - 1 > 65535)
      throw CLI::ValidationError("--base-port", std::to_string(*base_port) + " + "
                                                  + std::to_string(o->nodes)
                                                  + " nodes runs past port 65535");
    o->base_port = static_cast<uint16_t>(*base_port);
    // Loopback, but any local user's program could reach the ports.
    o->tls = !*plain;
    if (!slowdown->empty())
      o->slowdowns = parse_list<double>(*slowdown, "--slowdown", &to_double);
    if (!memory->empty())
      o->memory = parse_list<int64_t>(*memory, "--memory", &to_memory);
    if (!devices->empty())
      o->devices = parse_list<std::string>(*devices, "--device", &to_device_name);
    std::signal(SIGINT, on_cluster_signal);
    std::signal(SIGTERM, on_cluster_signal);
    if (!job->empty()) {
      int code = 0;
      { // the nodes stop (and their temporary logs go) before the exit
        actors::local_cluster cluster{*o};
        print_nodes(cluster);
        auto spec = actors::load_job_file(*job);
        spec.nodes = cluster.endpoints();
        spec.credentials = cluster.credentials_folder();
        spec.resume_from = *resume;
        if (spec.progress < 0)
          spec.progress = 1;
        // A signal while the nodes started: no job.
        code = cluster_signal ? 128 + cluster_signal.load()
                              : run_job_with_signals(spec);
      }
      if (code)
        std::exit(code); // stopped by a signal: 128 + the signal
      return;
    }
    if (!serve->empty()) {
      auto spec = actors::load_serve_file(*serve);
      // Before the nodes start on this host: beside them the profile comes
      // out slower than they compute (server.hpp).
      if (!spec.plan && spec.profile_path.empty() && spec.checkpoint.empty())
        spec.profile = actors::profile_for_serving(spec.model, spec.model_options,
                                                   spec.micro_batch);
      int code = 0;
      { // the nodes stop (and their temporary logs go) before the exit
        actors::local_cluster cluster{*o};
        print_nodes(cluster);
        spec.nodes = cluster.endpoints();
        spec.credentials = cluster.credentials_folder();
        // A signal while the nodes started: nothing served.
        code = cluster_signal ? 128 + cluster_signal.load()
                              : run_serve_with_signals(spec);
      }
      if (code)
        std::exit(code); // stopped by a signal: 128 + the signal
      return;
    }
    actors::local_cluster cluster{*o};
    print_nodes(cluster);
    if (o->tls)
      std::printf("cluster running; Ctrl-C stops it. Jobs connect with "
                  "--credentials %s (removed when the cluster stops)\n",
                  cluster.credentials_folder().c_str());
    else
      std::printf("cluster running (plain TCP, no credentials); Ctrl-C stops it\n");
    std::fflush(stdout);
    while (cluster_signal == 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::printf("stopping %d nodes\n", o->nodes);
  });
}

} // namespace asteroid::apps
