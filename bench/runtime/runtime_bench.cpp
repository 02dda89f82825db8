// Runtime overheads (issue #6), measured side by side in one run:
// 1. one training step through the framework (supervisor + one node process
//    + replica actor) against a plain LibTorch loop in this process, same
//    model, data, optimizer and thread count;
// 2. moving a tensor-sized message between two node processes on the data
//    plane (where replicas send tensors) and in a CAF message, against raw
//    TCP between two processes on the same loopback.
#include "asteroid/actors/job.hpp"
#include "asteroid/actors/node.hpp"
#include "asteroid/actors/remote_probe.hpp"
#include "asteroid/actors/replica.hpp"
#include "asteroid/data/make_dataset.hpp"
#include "asteroid/kernels/allocator.hpp"
#include "asteroid/data/sampler.hpp"
#include "asteroid/training/optimizer.hpp"

#include <CLI/CLI.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

using namespace asteroid;
using nlohmann::json;
using steady = std::chrono::steady_clock;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

double seconds_since(steady::time_point t0) {
  return std::chrono::duration<double>(steady::now() - t0).count();
}

// -- 1. framework step vs plain loop ------------------------------------------

double plain_loop_step_s(const std::string& model_name, const data::dataset& train,
                         int64_t batch, int64_t steps, int64_t warmup) {
  torch::manual_seed(1);
  auto model = actors::build_model(model_name, json::object());
  model->train();
  training::optimizer_options o;
  o.lr = 0.02;
  o.momentum = 0.9;
  auto opt = training::make_optimizer(o, model->parameters());
  data::sampler order{train.size(), 1};
  auto batches = order.batches(0, batch, true);
  std::vector<double> times;
  for (int64_t s = 0; s < steps + warmup; ++s) {
    auto t0 = steady::now();
    auto b = train.get_batch(batches[static_cast<size_t>(s) % batches.size()]);
    opt->zero_grad();
    auto loss = torch::nn::functional::cross_entropy(model->forward(b.inputs),
                                                     b.targets);
    loss.backward();
    opt->step();
    if (s >= warmup)
      times.push_back(seconds_since(t0));
  }
  return median(times);
}

double framework_step_s(const std::string& model_name,
                        std::shared_ptr<data::dataset> train, int64_t batch,
                        int64_t steps, int64_t warmup, uint16_t port,
                        int64_t snapshot_every) {
  actors::local_cluster::options co;
  co.exe = ASTEROID_CLI_PATH;
  co.nodes = 1;
  co.base_port = port;
  actors::local_cluster cluster{co};
  actors::job_spec job;
  job.model = model_name;
  job.batch_size = batch;
  job.micro_batches = 1;
  job.optimizer.lr = 0.02;
  job.optimizer.momentum = 0.9;
  job.max_steps = steps + warmup;
  job.evaluate = false;
  job.progress = 0;
  job.seed = 1;
  job.nodes = cluster.endpoints();
  job.fault_tolerance.snapshot_every = snapshot_every;
  torch::manual_seed(1);
  auto model = actors::build_model(model_name, json::object());
  planner::plan p;
  p.planner = "bench";
  p.batch_size = batch;
  p.micro_batches = 1;
  p.stages = {{0, static_cast<int>(model->size()), {0}, {batch}}};
  job.plan = p;
  caf::actor_system_config cfg;
  actors::configure(cfg);
  caf::actor_system sys{cfg};
  auto devices = actors::connect_all(sys, job.nodes, std::chrono::seconds(3));
  auto r = actors::run_job(sys, job, devices, model, train, nullptr);
  std::vector<double> times;
  for (size_t i = static_cast<size_t>(warmup); i < r.iterations.size(); ++i)
    times.push_back(r.iterations[i]["seconds"].get<double>());
  return median(times);
}

// -- 2. transfers -----------------------------------------------------------------

bool write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    auto k = ::write(fd, p, n);
    if (k <= 0)
      return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

bool read_all(int fd, char* p, size_t n) {
  while (n > 0) {
    auto k = ::read(fd, p, n);
    if (k <= 0)
      return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

/// Raw TCP between two processes: a child echoes one byte per framed
/// message; bandwidth = bytes / (round trip of `bytes` - round trip of 1),
/// without the probe's payload growth (raw loopback resolves 1 MiB).
double raw_tcp_Bps(int64_t bytes, int repeats, uint16_t port) {
  int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  ::setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0
      || ::listen(listener, 1) != 0) {
    std::fprintf(stderr, "runtime_bench: cannot listen on port %u\n", port);
    return 0;
  }
  auto pid = ::fork();
  if (pid == 0) {
    int fd = ::accept(listener, nullptr, nullptr);
    std::vector<char> buf;
    for (;;) {
      uint64_t n = 0;
      if (!read_all(fd, reinterpret_cast<char*>(&n), sizeof n))
        break;
      buf.resize(n);
      if (!read_all(fd, buf.data(), n) || !write_all(fd, "k", 1))
        break;
    }
    std::_Exit(0);
  }
  ::close(listener);
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    return 0;
  }
  // As the node's probe: the two sizes take turns, the fastest trip of each
  // is kept, and the first pair warms the connection up.
  const std::string tiny_payload(1, 'x'), big_payload(static_cast<size_t>(bytes), 'x');
  auto time_one = [&](const std::string& payload) {
    uint64_t n = payload.size();
    auto t0 = steady::now();
    char ack = 0;
    write_all(fd, reinterpret_cast<char*>(&n), sizeof n);
    write_all(fd, payload.data(), n);
    read_all(fd, &ack, 1);
    return seconds_since(t0);
  };
  time_one(tiny_payload);
  time_one(big_payload);
  double tiny = 1e9, big = 1e9;
  for (int i = 0; i < repeats; ++i) {
    tiny = std::min(tiny, time_one(tiny_payload));
    big = std::min(big, time_one(big_payload));
  }
  ::close(fd);
  ::waitpid(pid, nullptr, 0);
  return static_cast<double>(bytes) / std::max(big - tiny, 1e-9);
}

} // namespace

int main(int argc, char** argv) {
  kernels::keep_tensor_buffers_in_heap(); // as every asteroid process
  CLI::App app{"Asteroid runtime overheads: framework step vs plain LibTorch "
               "loop; CAF transfer vs raw TCP"};
  std::string model = "cnn";
  int64_t batch = 64, steps = 30, warmup = 3;
  int repeats = 5, rounds = 3;
  uint16_t port = 27650;
  app.add_option("--model", model, "model of the step comparison");
  app.add_option("--batch", batch, "mini-batch size");
  app.add_option("--steps", steps, "timed steps (median kept)");
  app.add_option("--repeats", repeats, "round trips per transfer size");
  app.add_option("--rounds", rounds, "interleaved rounds of the step comparison");
  app.add_option("--base-port", port, "first of 10 ports used");
  CLI11_PARSE(app, argc, argv);
  if (std::string(ASTEROID_CLI_PATH).empty()) {
    std::fprintf(stderr, "runtime_bench: the asteroid program is not built\n");
    return 2;
  }
  torch::set_num_threads(1); // as the node (--threads 1)
  data::dataset_options dopts;
  dopts.count = batch * (steps + warmup);
  dopts.shape = {1, 28, 28};
  dopts.num_classes = 10;
  dopts.seed = 7;
  auto train = data::make_dataset("synthetic-images", dopts);

  // Interleaved rounds, best round kept: on a shared 2-core machine one
  // round can be disturbed by anything else running; all rounds are printed.
  double plain = 1e9, framework = 1e9, framework_nosnap = 1e9;
  for (int round = 0; round < rounds; ++round) {
    auto a = plain_loop_step_s(model, *train, batch, steps, warmup);
    auto b = framework_step_s(model, train, batch, steps, warmup, port, 1);
    auto c = framework_step_s(model, train, batch, steps, warmup,
                              static_cast<uint16_t>(port + 1), 0);
    std::fprintf(stderr, "round %d: plain %.2f ms, framework %.2f ms, "
                         "framework without snapshots %.2f ms\n",
                 round + 1, a * 1e3, b * 1e3, c * 1e3);
    plain = std::min(plain, a);
    framework = std::min(framework, b);
    framework_nosnap = std::min(framework_nosnap, c);
  }
  std::printf("\nOne device, %s, batch %lld, 1 thread, median of %lld steps "
              "(%lld warm-up), best of %d interleaved rounds\n\n",
              model.c_str(), static_cast<long long>(batch),
              static_cast<long long>(steps), static_cast<long long>(warmup),
              rounds);
  std::printf("| run | step ms | vs plain loop |\n|---|---|---|\n");
  std::printf("| plain LibTorch loop (this process) | %.2f | 1.000 |\n", plain * 1e3);
  std::printf("| framework, snapshots every step (default) | %.2f | %.3f |\n",
              framework * 1e3, framework / plain);
  std::printf("| framework, no snapshots | %.2f | %.3f |\n",
              framework_nosnap * 1e3, framework_nosnap / plain);

  // Transfers: CAF between two node processes vs raw TCP between two.
  actors::local_cluster::options co;
  co.exe = ASTEROID_CLI_PATH;
  co.nodes = 2;
  co.base_port = static_cast<uint16_t>(port + 2);
  actors::local_cluster cluster{co};
  caf::actor_system_config cfg;
  actors::configure(cfg);
  caf::actor_system sys{cfg};
  auto devices = actors::connect_all(sys, cluster.endpoints(), std::chrono::seconds(3));
  std::printf("\nTensor-sized messages between two node processes on loopback "
              "(fastest of %d round trips; bandwidth = size / (round trip - "
              "round trip of 1 byte))\n\n| size | data plane MB/s | CAF 0.17 "
              "message MB/s | raw TCP MB/s | data plane / raw | CAF / raw "
              "|\n|---|---|---|---|---|---|\n",
              repeats);
  for (int64_t mib : {1, 16}) {
    actors::link_probe_options lp;
    lp.bytes = mib << 20;
    lp.repeats = repeats;
    lp.path = actors::probe_data_plane;
    auto dp_bw = actors::measure_link(sys, devices[0], cluster.endpoints()[1], lp)
                   .bandwidth_Bps;
    lp.path = actors::probe_caf;
    auto caf_bw = actors::measure_link(sys, devices[0], cluster.endpoints()[1], lp)
                    .bandwidth_Bps;
    auto raw_bw = raw_tcp_Bps(mib << 20, repeats,
                              static_cast<uint16_t>(port + (mib == 1 ? 5 : 6)));
    std::printf("| %lld MiB | %.1f | %.1f | %.1f | %.3f | %.3f |\n",
                static_cast<long long>(mib), dp_bw / 1e6, caf_bw / 1e6,
                raw_bw / 1e6, raw_bw > 0 ? dp_bw / raw_bw : 0.0,
                raw_bw > 0 ? caf_bw / raw_bw : 0.0);
  }
  return 0;
}
