// `asteroid node`: one device's process (run_node): its actor system, data
// plane and published device actor, until SIGINT or SIGTERM.
#include "asteroid/actors/node.hpp"

#include "asteroid/actors/data_plane.hpp"
#include "asteroid/kernels/allocator.hpp"
#include "asteroid/kernels/compute_device.hpp"
#include "asteroid/kernels/cpu_threads.hpp"

#include <arpa/inet.h>
#include <caf/openssl/publish.hpp>
#include <caf/openssl/manager.hpp>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <atomic>
#include <cmath>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <thread>

namespace asteroid::actors {

namespace {

std::atomic<int> stop_signal{0};

extern "C" void on_signal(int sig) { stop_signal = sig; }

/// Refuses a node anyone on the network could drive, unless asked for.
void check_exposure(const node_options& opts) {
  if (!opts.net.tls.empty() || is_loopback_host(opts.host))
    return;
  if (!opts.insecure)
    throw std::invalid_argument(
      "node: refusing to listen on " + opts.host
      + " without credentials: anyone who reaches that address could drive "
        "this node and read its weights. Give --credentials DIR (made by "
        "`asteroid keys`), listen on 127.0.0.1, or accept the risk with "
        "--insecure");
  spdlog::warn("node {}: INSECURE: listening on {} without credentials "
               "(--insecure): any program that reaches this address can "
               "drive this node and read the weights and tensors it holds "
               "(docs/security.md)",
               opts.device.name, opts.host);
}

} // namespace

bool is_loopback_host(const std::string& host) {
  if (host == "localhost" || host == "::1")
    return true;
  in_addr a{};
  return ::inet_pton(AF_INET, host.c_str(), &a) == 1
         && (ntohl(a.s_addr) >> 24) == 127;
}

int run_node(const node_options& opts) {
  kernels::keep_tensor_buffers_in_heap();
  if (!(std::isfinite(opts.device.slowdown) && opts.device.slowdown >= 1.0))
    throw std::invalid_argument("node: --slowdown must be a finite number >= 1, got "
                                + std::to_string(opts.device.slowdown));
  if (opts.device.threads < 1)
    throw std::invalid_argument("node: --threads must be >= 1, got "
                                + std::to_string(opts.device.threads));
  if (opts.device.memory_bytes < 0)
    throw std::invalid_argument("node: --memory must not be negative");
  check_exposure(opts);
  // Before anything listens: a node that cannot compute where it was told
  // to says so at start, not at its first deployment.
  torch::Device compute = torch::kCPU;
  try {
    compute = kernels::resolve_compute_device(opts.device.compute_device);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string("node: ") + e.what());
  }
  const auto hardware = kernels::describe_device(compute);
  if (compute.is_cuda())
    // cuDNN's convolutions default to TF32 on Ampere and later GPUs (Jetson
    // Orin among them), which rounds their inputs to 10 mantissa bits: the
    // weights would drift from single-device fp32 training, which a pipeline
    // promises to equal (tests/actors/cuda_node_test).
    at::globalContext().setAllowTF32CuDNN(false);
  kernels::set_cpu_threads(opts.device.threads);
  caf::actor_system_config cfg;
  configure(cfg, opts.net);
  caf::actor_system sys{cfg};
  auto dev_opts = opts.device;
  dev_opts.compute_device = compute.str();
  std::shared_ptr<data_plane> dp;
  if (opts.data_plane) {
    data_plane::options dpo;
    dpo.host = opts.host;
    dpo.port = opts.data_port;
    dpo.rate_Bps = opts.link_rate_Bps;
    dpo.tls = opts.net.tls;
    dp = data_plane::start(dpo);
  }
  auto device = spawn_device(sys, dev_opts, dp);
  const bool tls = uses_tls(sys);
  auto port = tls ? caf::openssl::publish(device, opts.port, opts.host.c_str(), true)
                  : sys.middleman().publish(device, opts.port, opts.host.c_str(),
                                            true);
  if (!port) {
    caf::anon_send_exit(device, caf::exit_reason::user_shutdown);
    throw std::runtime_error("node " + opts.device.name + ": cannot listen on "
                             + opts.host + ":" + std::to_string(opts.port)
                             + ": " + sys.render(port.error()));
  }
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  std::printf("asteroid node %s listening on %s:%u (%s, device %s, memory %lld B, %d "
              "threads, slowdown %.2f%s, data plane %s)\n",
              opts.device.name.c_str(), opts.host.c_str(),
              static_cast<unsigned>(*port),
              (tls ? "TLS, cluster CA " + opts.net.tls.ca
                   : std::string("plain TCP, no credentials"))
                .c_str(),
              (compute.is_cuda() ? hardware.device + " " + hardware.name + " with "
                                     + std::to_string(hardware.memory_bytes >> 20) + " MiB"
                                 : std::string("cpu"))
                .c_str(),
              static_cast<long long>(opts.device.memory_bytes),
              opts.device.threads, opts.device.slowdown,
              opts.device.slowdown != 1.0 ? " emulated" : "",
              !dp ? "off"
                  : (std::to_string(dp->port())
                     + (opts.link_rate_Bps > 0
                          ? ", paced to " + std::to_string(opts.link_rate_Bps * 8e-6)
                              + " Mbit/s (emulated link)"
                          : ""))
                      .c_str());
  std::fflush(stdout);
  while (stop_signal == 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  spdlog::info("node {}: signal {}, stopping", opts.device.name,
               stop_signal.load());
  if (dp)
    spdlog::info("{}: data plane so far: {}", opts.device.name, to_string(dp->stats()));
  caf::anon_send(device, stop_atom::value);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  caf::anon_send_exit(device, caf::exit_reason::user_shutdown);
  if (tls) // caf/openssl/unpublish.hpp names an atom CAF 0.17 lacks
    caf::make_function_view(sys.openssl_manager().actor_handle())(
      caf::unpublish_atom::value, caf::actor_cast<caf::actor_addr>(device), *port);
  else
    sys.middleman().unpublish(device, *port);
  // Replicas quit on stop; do not wait forever for one stuck in compute.
  std::fflush(stdout);
  std::_Exit(0);
}

} // namespace asteroid::actors
