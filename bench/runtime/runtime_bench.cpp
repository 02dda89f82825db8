// Runtime overheads (issue #6), measured side by side in one run:
// 1. one training step through the framework (supervisor + one node process
//    + replica actor) against a plain LibTorch loop in this process, same
//    model, data, optimizer and thread count;
// 2. streaming tensor-sized messages between two node processes on the data
//    plane (where replicas send tensors) and in CAF messages, against
//    iperf3 on the same loopback (a stream over one persistent connection,
//    the ceiling a data plane can approach) and a raw-TCP loop that moves
//    the stream's own distinct payloads (raw_tcp_stream.hpp);
// 3. the same streams between two testbed devices in network namespaces,
//    over their veths and bridge, against iperf3 and the raw-TCP anchor
//    between the same two (this program's --raw-send and --raw-receive).
#include "../measuring_job.hpp"
#include "../median.hpp"
#include "raw_tcp_stream.hpp"

#include "asteroid/actors/job.hpp"
#include "asteroid/actors/node.hpp"
#include "asteroid/actors/remote_probe.hpp"
#include "asteroid/data/make_dataset.hpp"
#include "asteroid/data/sampler.hpp"
#include "asteroid/kernels/allocator.hpp"
#include "asteroid/planner/given_plan.hpp"
#include "asteroid/training/model_registry.hpp"
#include "asteroid/training/optimizer.hpp"

#include <CLI/CLI.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <tuple>

using namespace asteroid;
using nlohmann::json;
using steady = std::chrono::steady_clock;

namespace {

using asteroid::bench::median;

double seconds_since(steady::time_point t0) {
  return std::chrono::duration<double>(steady::now() - t0).count();
}

// -- 1. framework step vs plain loop ------------------------------------------

double plain_loop_step_s(const std::string& model_name, const data::dataset& train,
                         int64_t batch, int64_t steps, int64_t warmup) {
  torch::manual_seed(1);
  auto model = training::build_model(model_name, json::object());
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

struct framework_steps {
  double step_s = 0;    ///< median step as the supervisor times it
  double compute_s = 0; ///< median of the replica's compute in those steps
  double micro_batch_messages = 0; ///< report messages, median per step, from the records
};

/// How a framework run differs from the default job.
struct framework_settings {
  int64_t snapshot_every = 1;
  bool run_ahead = true;
  int micro_batches = 1;
  bool micro_batch_actors = true;
};

framework_steps framework_step_s(const std::string& model_name,
                        std::shared_ptr<data::dataset> train, int64_t batch,
                        int64_t steps, int64_t warmup, uint16_t port,
                        const framework_settings& how) {
  actors::local_cluster::options co;
  co.exe = ASTEROID_CLI_PATH;
  co.nodes = 1;
  co.base_port = port;
  actors::local_cluster cluster{co};
  torch::manual_seed(1);
  auto model = training::build_model(model_name, json::object());
  auto p = planner::given_plan("bench", batch, how.micro_batches,
                               {{0, static_cast<int>(model->size()), {0},
                                 {batch / how.micro_batches}}});
  auto job = bench::measuring_job(model_name, p, steps + warmup, cluster.endpoints());
  job.fault_tolerance.snapshot_every = how.snapshot_every;
  job.run_ahead = how.run_ahead;
  job.micro_batch_actors = how.micro_batch_actors;
  caf::actor_system_config cfg;
  actors::configure(cfg);
  caf::actor_system sys{cfg};
  auto devices = actors::connect_all(sys, job.nodes, std::chrono::seconds(3));
  auto r = actors::run_job(sys, job, devices, model, train, nullptr);
  std::vector<double> times, busy, messages;
  for (size_t i = static_cast<size_t>(warmup); i < r.iterations.size(); ++i) {
    times.push_back(r.iterations[i]["seconds"].get<double>());
    busy.push_back(r.iterations[i]["replicas"][0]["busy_s"].get<double>());
    messages.push_back(r.iterations[i]["micro_batch_messages"].get<double>());
  }
  return {median(times), median(busy), median(messages)};
}

// -- 2. transfers -----------------------------------------------------------------

/// iperf3 (the Debian package) over loopback: a one-off server on `port`
/// and a client sending for `seconds` (or, with `total_bytes` > 0, that
/// many bytes: `-n`) in writes of `write_bytes` (iperf3 allows at most
/// 1 MiB per write); bits received per second from its JSON report, in
/// bytes per second. 0 (and a message) when iperf3 is missing or fails.
/// Every wait is bounded: the server is killed if it has not exited 10 s
/// after the client.
double iperf3_Bps(uint16_t port, int64_t write_bytes, int seconds, int64_t total_bytes = 0) {
  write_bytes = std::min<int64_t>(write_bytes, int64_t{1} << 20);
  if (std::system("command -v iperf3 > /dev/null 2>&1") != 0) {
    std::fprintf(stderr, "runtime_bench: iperf3 is not installed (scripts/setup.sh "
                         "installs it); the anchor column stays empty\n");
    return 0;
  }
  // Unflushed output would be written twice: once by the child. The child
  // of this multi-threaded process only calls async-signal-safe functions
  // (no allocation) before exec.
  std::fflush(stdout);
  std::fflush(stderr);
  const auto p = std::to_string(port);
  auto server = ::fork();
  if (server == 0) {
    int null_fd = ::open("/dev/null", O_WRONLY);
    ::dup2(null_fd, STDOUT_FILENO);
    ::dup2(null_fd, STDERR_FILENO);
    ::execlp("iperf3", "iperf3", "-s", "-1", "-B", "127.0.0.1", "-p", p.c_str(),
             static_cast<char*>(nullptr));
    std::_Exit(127);
  }
  double Bps = 0;
  std::string error;
  for (int attempt = 0; attempt < 30 && Bps == 0; ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    auto amount = total_bytes > 0 ? " -n " + std::to_string(total_bytes)
                                  : " -t " + std::to_string(seconds);
    auto cmd = "iperf3 -c 127.0.0.1 -p " + std::to_string(port) + amount + " -l " +
               std::to_string(write_bytes) + " -J 2>/dev/null";
    std::string out;
    if (auto* f = ::popen(cmd.c_str(), "r")) {
      char buf[4096];
      size_t n = 0;
      while ((n = std::fread(buf, 1, sizeof buf, f)) > 0)
        out.append(buf, n);
      ::pclose(f);
    }
    auto j = json::parse(out, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      error = "no JSON report";
      continue;
    }
    if (j.contains("error")) {
      error = j["error"].get<std::string>(); // e.g. the server is not up yet
      continue;
    }
    Bps = j["end"]["sum_received"]["bits_per_second"].get<double>() / 8;
  }
  for (int i = 0; i < 100 && ::waitpid(server, nullptr, WNOHANG) == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ::kill(server, SIGKILL);
  ::waitpid(server, nullptr, 0);
  if (Bps == 0)
    std::fprintf(stderr, "runtime_bench: iperf3 on port %u failed: %s\n", port,
                 error.c_str());
  return Bps;
}

/// One round over a testbed veth at one size, Mbit/s: the data plane's
/// stream, then iperf3 for 3 s and for the stream's bytes, then the raw-TCP
/// anchor, a few seconds apart.
struct veth_round {
  double data_plane = 0, iperf3 = 0, iperf3_burst = 0, raw_tcp = 0;
};

/// Streams over a testbed veth: every round per size (1 and 16 MiB), or why
/// they were not measured.
struct veth_streams {
  std::array<std::vector<veth_round>, 2> rounds;
  std::string problem;
};

/// Median and largest over the rounds of `of(round)`.
template <class Of>
std::pair<double, double> median_and_fastest(const std::vector<veth_round>& rounds, Of of) {
  std::vector<double> v;
  for (const auto& r : rounds)
    v.push_back(of(r));
  return {v.empty() ? 0.0 : median(v), v.empty() ? 0.0 : *std::max_element(v.begin(), v.end())};
}

/// This program's path: veth_streams.sh runs its raw-TCP anchor's two sides.
std::string this_program() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string{"runtime_bench"} : p.string();
}

/// Runs scripts/testbed.sh with two unshaped devices (TLS unless `plain`, which
/// then measures the data plane only)
/// and bench/runtime/veth_streams.sh as its command, `rounds` rounds.
veth_streams veth_streams_of(bool plain, int rounds, uint16_t port) {
  veth_streams v;
  const std::string source = ASTEROID_SOURCE_DIR;
  auto cluster = std::filesystem::temp_directory_path()
                 / ("runtime_bench_veth_" + std::to_string(::getpid()) + ".json");
  std::ofstream{cluster} << R"({"devices": [{"name": "a", "speed": 1, "memory": "1GiB"},)"
                         << R"( {"name": "b", "speed": 1, "memory": "1GiB"}], "link_mbps": 1000})";
  auto quoted = [](const std::string& path) { return "'" + path + "'"; };
  const std::string exe = ASTEROID_CLI_PATH;
  auto cmd = quoted(source + "/scripts/testbed.sh") + " --cluster " + quoted(cluster.string())
             + " --no-shape --base-port " + std::to_string(port) + (plain ? " --no-tls" : "")
             + " --exe " + quoted(exe) + " -- " + quoted(source + "/bench/runtime/veth_streams.sh")
             + " " + quoted(exe) + " " + std::to_string(port + 2) + " "
             + std::to_string(rounds) + " " + quoted(this_program())
             // The TLS testbed's anchors would not be used (its streams
             // are compared with the plain ones').
             + (plain ? " anchors" : " no-anchors") + " 2>&1";
  std::string out;
  if (FILE* f = ::popen(cmd.c_str(), "r")) {
    std::array<char, 4096> buf;
    while (std::fgets(buf.data(), static_cast<int>(buf.size()), f))
      out += buf.data();
    auto wait_status = ::pclose(f);
    auto status = wait_status == -1         ? -1
                  : WIFEXITED(wait_status) ? WEXITSTATUS(wait_status)
                                           : 128 + WTERMSIG(wait_status);
    std::istringstream lines{out};
    std::string line;
    while (std::getline(lines, line)) {
      std::istringstream in{line};
      std::string tag;
      double mib = 0;
      veth_round r;
      if (!(in >> tag >> mib >> r.data_plane >> r.iperf3 >> r.iperf3_burst >> r.raw_tcp)
          || tag != "veth")
        continue;
      v.rounds[mib < 8 ? 0 : 1].push_back(r);
    }
    bool every_row = true;
    for (const auto& size : v.rounds) {
      every_row = every_row && static_cast<int>(size.size()) == rounds;
      for (const auto& r : size)
        every_row = every_row && r.data_plane > 0
                    && (!plain || (r.iperf3 > 0 && r.iperf3_burst > 0 && r.raw_tcp > 0));
    }
    if (status != 0 || !every_row) {
      // The testbed's last words say why (no root, no namespaces, ...).
      auto tail = out.size() > 600 ? out.substr(out.size() - 600) : out;
      std::replace(tail.begin(), tail.end(), '\n', ' ');
      v.problem = "testbed exit status " + std::to_string(status) + ": " + tail;
    }
  } else {
    v.problem = "cannot run " + cmd;
  }
  std::filesystem::remove(cluster);
  return v;
}

/// Messages per stream: about `stream_mib` MiB in all, at least 4.
int stream_count(int64_t bytes, int64_t stream_mib) {
  return static_cast<int>(std::max<int64_t>(4, (stream_mib << 20) / bytes));
}

} // namespace

int main(int argc, char** argv) {
  kernels::keep_tensor_buffers_in_heap(); // as every asteroid process
  CLI::App app{"Asteroid runtime overheads: framework step vs plain LibTorch "
               "loop; data plane and CAF transfers vs iperf3"};
  std::string model = "cnn";
  int64_t batch = 64, steps = 30, warmup = 3;
  int repeats = 5, rounds = 3;
  uint16_t port = 27650;
  app.add_option("--model", model, "model of the step comparison");
  app.add_option("--batch", batch, "mini-batch size");
  app.add_option("--steps", steps, "timed steps (median kept)");
  app.add_option("--repeats", repeats, "interleaved streams per transfer size and path");
  app.add_option("--rounds", rounds, "interleaved rounds of the step comparison");
  app.add_option("--base-port", port,
                 "first of 12 loopback ports used (port .. port + 11); the veth testbeds use "
                 "port + 12 .. port + 14 inside their namespaces");
  int veth_rounds = 7;
  app.add_option("--veth-rounds", veth_rounds, "interleaved rounds over the testbed veth")
    ->check(CLI::Range(1, 50));
  bool no_veth = false;
  app.add_flag("--no-veth", no_veth,
               "skip the streams over a testbed veth (they need root and network namespaces)");
  int64_t stream_mib = 64;
  app.add_option("--stream-mib", stream_mib,
                 "bytes of one loopback stream, in MiB (its messages are prepared in the "
                 "sending node's memory before the clock starts)")
    ->check(CLI::Range(int64_t{16}, int64_t{4096}));
  bool transfers_only = false;
  app.add_flag("--transfers-only", transfers_only,
               "skip the step comparison: only the transfer streams, paced links and veth "
               "streams");
  // The raw-TCP anchor's two sides as processes of their own, for the
  // streams over a veth (veth_streams.sh runs one in each namespace).
  std::string raw_receive, raw_send;
  int64_t raw_bytes = 1 << 20;
  int raw_count = 64;
  app.add_option("--raw-receive", raw_receive,
                 "only receive a raw-TCP anchor's streams on IPv4:PORT, then exit "
                 "(bench/runtime/veth_streams.sh)");
  app.add_option("--raw-send", raw_send,
                 "only send a raw-TCP anchor's streams to IPv4:PORT and print Mbit/s "
                 "(bench/runtime/veth_streams.sh)");
  app.add_option("--raw-bytes", raw_bytes, "payload bytes of a raw-TCP stream")
    ->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
  app.add_option("--raw-count", raw_count, "payloads per raw-TCP stream")
    ->check(CLI::Range(1, 4096));
  CLI11_PARSE(app, argc, argv);
  if (!raw_receive.empty() || !raw_send.empty()) {
    if (raw_bytes * raw_count > (int64_t{1} << 30)) {
      std::fprintf(stderr, "runtime_bench: --raw-bytes x --raw-count must be at most 1 GiB\n");
      return 2;
    }
    const auto& at = raw_receive.empty() ? raw_send : raw_receive;
    auto colon = at.rfind(':');
    int64_t p = 0;
    try {
      size_t used = 0;
      auto digits = colon == std::string::npos ? std::string{} : at.substr(colon + 1);
      p = std::stoll(digits, &used);
      if (used != digits.size())
        p = 0;
    } catch (const std::exception&) {
      p = 0;
    }
    if (p < 1 || p > 65535 || !raw_receive.empty() == !raw_send.empty()) {
      std::fprintf(stderr, "runtime_bench: give one of --raw-receive and --raw-send, as "
                           "IPv4:PORT (got '%s')\n",
                   at.c_str());
      return 2;
    }
    const auto ip = at.substr(0, colon);
    const auto raw_port = static_cast<uint16_t>(p);
    if (!raw_receive.empty())
      return bench::raw_tcp_receive(ip, raw_port, raw_bytes, raw_count) ? 0 : 1;
    auto Bps = bench::raw_tcp_send_Bps(ip, raw_port, raw_bytes, raw_count);
    if (Bps <= 0)
      return 1;
    std::printf("%.1f\n", Bps * 8e-6);
    return 0;
  }
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

  if (!transfers_only) {
    // Interleaved rounds. On a shared 2-core machine the host's speed drifts
    // (the plain loop alone reads 51-73 ms on different rounds of one run), so
    // the plain loop runs before the first round and after every round, and
    // each round's framework steps are compared with the mean of the plain
    // loops on either side of it: a drift that is linear over a round cancels.
    // The median of those ratios is the result; the best round of each column
    // is printed too. The replica's own compute time splits the framework's
    // step into the model's work and what the step costs around it.
    // Each run with micro-batch actors off follows its twin with them on, so
    // their ratio in a round sees the same host.
    struct variant {
      const char* name;
      framework_settings how;
      double best = 1e9;
      std::vector<double> ratios, compute_ratios, around_ms, steps_s, messages;
    };
    std::vector<variant> variants{
      {"framework, snapshots every step (default)", {1, true, 1, true}},
      {"framework, default, no micro-batch actors", {1, true, 1, false}},
      {"framework, no snapshots", {0, true, 1, true}},
      {"framework, no snapshots, no run-ahead", {0, false, 1, true}},
      {"framework, default, 4 micro-batches", {1, true, 4, true}},
      {"framework, default, 4 micro-batches, no micro-batch actors", {1, true, 4, false}}};
    enum { v_default, v_no_mb_actors, v_no_snapshots, v_lockstep, v_m4, v_m4_no_mb_actors };
    std::vector<double> plains{plain_loop_step_s(model, *train, batch, steps, warmup)};
    for (int round = 0; round < rounds; ++round) {
      std::vector<framework_steps> runs;
      for (size_t v = 0; v < variants.size(); ++v)
        runs.push_back(framework_step_s(model, train, batch, steps, warmup,
                                        static_cast<uint16_t>(port + v),
                                        variants[v].how));
      plains.push_back(plain_loop_step_s(model, *train, batch, steps, warmup));
      auto a = (plains[plains.size() - 2] + plains.back()) / 2;
      std::fprintf(stderr, "round %d: plain %.2f", round + 1, plains[plains.size() - 2] * 1e3);
      for (size_t v = 0; v < variants.size(); ++v) {
        auto& x = variants[v];
        const auto& r = runs[v];
        std::fprintf(stderr, " | %s %.2f ms (%.3f; compute %.2f)", x.name, r.step_s * 1e3,
                     r.step_s / a, r.compute_s * 1e3);
        x.best = std::min(x.best, r.step_s);
        x.ratios.push_back(r.step_s / a);
        x.compute_ratios.push_back(r.compute_s / a);
        x.around_ms.push_back((r.step_s - r.compute_s) * 1e3);
        x.steps_s.push_back(r.step_s);
        x.messages.push_back(r.micro_batch_messages);
      }
      std::fprintf(stderr, " | plain %.2f ms\n", plains.back() * 1e3);
    }
    double plain = *std::min_element(plains.begin(), plains.end());
    std::printf("\nOne device, %s, batch %lld, 1 thread, median of %lld steps "
                "(%lld warm-up), %d rounds, each between two plain loops\n\n",
                model.c_str(), static_cast<long long>(batch),
                static_cast<long long>(steps), static_cast<long long>(warmup),
                rounds);
    std::printf("| run | best round, step ms | best / best plain | median of the "
                "rounds' ratios to their plain loops |\n|---|---|---|---|\n");
    std::printf("| plain LibTorch loop (this process) | %.2f | 1.000 | 1.000 |\n",
                plain * 1e3);
    for (auto& x : variants)
      std::printf("| %s | %.2f | %.3f | %.3f |\n", x.name, x.best * 1e3, x.best / plain,
                  median(x.ratios));
    std::printf("\nWithout snapshots, median over rounds: the replica's compute (forward, "
                "backward, optimizer) %.3f of the plain step; the rest of the step (start "
                "and report messages, loading the batch) %.2f ms, %.2f ms without "
                "run-ahead\n",
                median(variants[v_no_snapshots].compute_ratios),
                median(variants[v_no_snapshots].around_ms),
                median(variants[v_lockstep].around_ms));
    // The micro-batch actors' cost: each round's step with them over the same
    // round's step without them, and the reports they received per step.
    auto cost = [&](int on, int off) {
      std::vector<double> r;
      for (size_t i = 0; i < variants[on].steps_s.size(); ++i)
        r.push_back(variants[on].steps_s[i] / variants[off].steps_s[i]);
      return median(r);
    };
    // Their messages are sent outside the replica's timed compute, so the
    // step's time around the compute shows their cost without the compute's
    // noise (which on a shared host is larger than the cost itself).
    auto around = [&](int v) { return median(variants[v].around_ms); };
    auto plain_ms = median(plains) * 1e3;
    std::printf("\nMicro-batch actors (one per micro-batch and step, told of each "
                "pass), with / without them, median over rounds\n\n| micro-batches "
                "| report messages per step | step ratio with / without | around the compute, "
                "with | without | difference / plain step |\n|---|---|---|---|---|---|\n");
    for (auto [on, off, m] : {std::tuple{v_default, v_no_mb_actors, 1},
                              std::tuple{v_m4, v_m4_no_mb_actors, 4}})
      std::printf("| %d | %.0f | %.3f | %.2f ms | %.2f ms | %+.4f |\n", m,
                  median(variants[on].messages), cost(on, off), around(on), around(off),
                  (around(on) - around(off)) / plain_ms);

  }

  // Transfers: streams of tensor-sized messages between two node processes
  // (data plane, CAF messages) vs iperf3 between two processes. Rounds
  // interleave the paths; the fastest stream of each is kept (noise on a
  // shared host only ever slows a stream down).
  actors::local_cluster::options co;
  co.exe = ASTEROID_CLI_PATH;
  co.nodes = 2;
  co.base_port = static_cast<uint16_t>(port + 3);
  actors::local_cluster cluster{co};
  caf::actor_system_config cfg;
  actors::configure(cfg);
  caf::actor_system sys{cfg};
  auto devices = actors::connect_all(sys, cluster.endpoints(), std::chrono::seconds(3));
  // The same two nodes with the cluster's credentials: every connection TLS
  // (docs/security.md), driven by a program with its own credentials.
  auto tls_co = co;
  tls_co.base_port = static_cast<uint16_t>(port + 10);
  tls_co.tls = true;
  actors::local_cluster tls_cluster{tls_co};
  caf::actor_system_config tls_cfg;
  actors::net_options tls_net;
  tls_net.tls = actors::credentials::from_folder(tls_cluster.credentials_folder());
  actors::configure(tls_cfg, tls_net);
  caf::actor_system tls_sys{tls_cfg};
  auto tls_devices = actors::connect_all(tls_sys, tls_cluster.endpoints(),
                                         std::chrono::seconds(3));
  std::printf("\nStreams of tensor-sized messages on loopback, node process to node "
              "process (data plane and CAF, plain TCP and TLS with the cluster's "
              "credentials) and iperf3 (3 s, writes of the tensor size up to iperf3's "
              "1 MiB, one persistent connection; and the stream's bytes, -n, on a fresh "
              "connection), and raw TCP moving the stream's distinct payloads between two "
              "threads of this process (1 MiB blocking calls, one persistent connection, "
              "a fresh buffer per payload): bandwidth = stream bytes / time until the last echo, "
              "fastest of %d interleaved streams per path; goal: data plane >= 0.9 x "
              "iperf3\n\n| size | messages per stream | data plane MB/s | TLS data "
              "plane MB/s | TLS / plain data plane | CAF 0.17 message MB/s | TLS CAF "
              "MB/s | iperf3 MB/s | data plane / iperf3 | CAF / iperf3 | iperf3, the "
              "stream's bytes, MB/s | data plane / that | raw TCP, the stream's payloads, "
              "MB/s | data plane / raw TCP |\n"
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
              repeats);
  for (int64_t mib : {1, 16}) {
    auto bytes = mib << 20;
    auto count = stream_count(bytes, stream_mib);
    double dp_bw = 0, tls_dp_bw = 0, caf_bw = 0, tls_caf_bw = 0, anchor_bw = 0,
           same_bytes_bw = 0, raw_bw = 0;
    for (int r = 0; r < repeats; ++r) {
      actors::link_probe_options lp;
      lp.bytes = bytes;
      lp.stream = count;
      auto stream = [&](caf::actor_system& s, const actors::device_actor& from,
                        const std::string& to, actors::probe_path path) {
        lp.path = path;
        return actors::measure_link(s, from, to, lp).bandwidth_Bps;
      };
      auto d = stream(sys, devices[0], cluster.endpoints()[1], actors::probe_data_plane);
      auto td = stream(tls_sys, tls_devices[0], tls_cluster.endpoints()[1],
                       actors::probe_data_plane);
      auto c = stream(sys, devices[0], cluster.endpoints()[1], actors::probe_caf);
      auto tc = stream(tls_sys, tls_devices[0], tls_cluster.endpoints()[1],
                       actors::probe_caf);
      const auto iperf3_port = static_cast<uint16_t>(port + (mib == 1 ? 5 : 6));
      auto t = iperf3_Bps(iperf3_port, bytes, 3);
      // The same bytes as one data-plane stream: a burst against a burst
      // (a 3 s run reads higher than a 64 MiB one on this host).
      auto tn = iperf3_Bps(iperf3_port, bytes, 0, bytes * count);
      auto raw = bench::raw_tcp_stream_Bps(iperf3_port, bytes, count);
      std::fprintf(stderr, "%lld MiB stream %d: data plane %.1f, TLS data plane %.1f, "
                           "CAF %.1f, TLS CAF %.1f, iperf3 %.1f, iperf3 -n %.1f, raw TCP "
                           "%.1f MB/s\n",
                   static_cast<long long>(mib), r + 1, d / 1e6, td / 1e6, c / 1e6,
                   tc / 1e6, t / 1e6, tn / 1e6, raw / 1e6);
      dp_bw = std::max(dp_bw, d);
      tls_dp_bw = std::max(tls_dp_bw, td);
      caf_bw = std::max(caf_bw, c);
      tls_caf_bw = std::max(tls_caf_bw, tc);
      anchor_bw = std::max(anchor_bw, t);
      same_bytes_bw = std::max(same_bytes_bw, tn);
      raw_bw = std::max(raw_bw, raw);
    }
    std::printf("| %lld MiB | %d | %.1f | %.1f | %.3f | %.1f | %.1f | %.1f | %.3f | "
                "%.3f | %.1f | %.3f | %.1f | %.3f |\n",
                static_cast<long long>(mib), count, dp_bw / 1e6, tls_dp_bw / 1e6,
                dp_bw > 0 ? tls_dp_bw / dp_bw : 0.0, caf_bw / 1e6, tls_caf_bw / 1e6,
                anchor_bw / 1e6, anchor_bw > 0 ? dp_bw / anchor_bw : 0.0,
                anchor_bw > 0 ? caf_bw / anchor_bw : 0.0, same_bytes_bw / 1e6,
                same_bytes_bw > 0 ? dp_bw / same_bytes_bw : 0.0, raw_bw / 1e6,
                raw_bw > 0 ? dp_bw / raw_bw : 0.0);
  }
  // Paced links: the same streams between two nodes whose data planes pace
  // what they send to a configured rate (the testbed's loopback fallback;
  // in network namespaces `tc` shapes the veth instead, docs/benchmarks.md).
  std::printf("\nStreams on paced loopback links (`asteroid node --link-rate`): 16 "
              "messages of 1 MiB, fastest of %d streams, plain TCP and TLS with the "
              "cluster's credentials\n\n| configured Mbit/s | data plane Mbit/s | "
              "TLS data plane Mbit/s | data plane / configured | TLS / plain |\n"
              "|---|---|---|---|---|\n",
              std::min(repeats, 3));
  for (double mbps : {100.0, 1000.0}) {
    double best[2] = {0, 0};
    for (bool tls : {false, true}) {
      actors::local_cluster::options po = co;
      po.base_port = static_cast<uint16_t>(port + (mbps < 500 ? 7 : 8));
      po.link_rates_mbps = {mbps};
      po.tls = tls;
      actors::local_cluster paced{po};
      caf::actor_system_config pcfg;
      actors::net_options pnet;
      if (tls)
        pnet.tls = actors::credentials::from_folder(paced.credentials_folder());
      actors::configure(pcfg, pnet);
      caf::actor_system psys{pcfg};
      auto paced_devices = actors::connect_all(psys, paced.endpoints(),
                                               std::chrono::seconds(3));
      actors::link_probe_options lp;
      lp.bytes = 1 << 20;
      lp.stream = 16;
      lp.path = actors::probe_data_plane;
      for (int r = 0; r < std::min(repeats, 3); ++r)
        best[tls] = std::max(best[tls], actors::measure_link(psys, paced_devices[0],
                                                             paced.endpoints()[1], lp)
                                          .bandwidth_Bps);
    }
    std::printf("| %.0f | %.1f | %.1f | %.3f | %.3f |\n", mbps, best[0] * 8e-6,
                best[1] * 8e-6, best[0] * 8e-6 / mbps,
                best[0] > 0 ? best[1] / best[0] : 0.0);
  }
  if (no_veth)
    return 0;
  // Over a veth: two testbed devices in network namespaces, links not
  // shaped, the path a testbed job's tensors take (veth, bridge, veth).
  std::printf("\nStreams between two testbed devices in network namespaces, links not shaped "
              "(scripts/testbed.sh --no-shape; plain: --no-tls): the data plane's 1 MiB x 64 "
              "and 16 MiB x 4 streams from node 0 to node 1 against iperf3 (1 MiB writes; 3 s, "
              "and the stream's bytes, -n, on a fresh connection) and the raw-TCP anchor (the "
              "stream's own payloads, one connection) between the same two namespaces, %d "
              "interleaved rounds (the data plane first in even rounds, last in odd ones); goal: "
              "data plane >= 0.9 x iperf3. Over a veth one method's "
              "rounds can spread twofold or more, so the ratios are the median of the rounds' "
              "own ratios (each round measures every column a few seconds apart); the rates "
              "are medians, and the fastest round of each follows.\n\n"
              "| size | data plane Mbit/s | TLS data plane Mbit/s | iperf3 3 s Mbit/s | data "
              "plane / iperf3 | iperf3, the stream's bytes, Mbit/s | data plane / that | raw "
              "TCP Mbit/s | data plane / raw TCP | TLS / plain |\n"
              "|---|---|---|---|---|---|---|---|---|---|\n",
              veth_rounds);
  auto plain_veth = veth_streams_of(true, veth_rounds, static_cast<uint16_t>(port + 12));
  auto tls_veth = plain_veth.problem.empty()
                    ? veth_streams_of(false, veth_rounds, static_cast<uint16_t>(port + 12))
                    : veth_streams{};
  if (!plain_veth.problem.empty()) {
    std::printf("| not measured | %s |\n", plain_veth.problem.c_str());
    return 0;
  }
  for (int fastest = 0; fastest < 2; ++fastest)
    for (int i = 0; i < 2; ++i) {
      // iperf3 and the raw anchor of the plain testbed, whose rounds
      // interleave with the plain streams: as many samples on each side.
      const auto& rounds = plain_veth.rounds[i];
      auto pick = [&](auto of) {
        auto m = median_and_fastest(rounds, of);
        return fastest ? m.second : m.first;
      };
      auto dp = pick([](const veth_round& r) { return r.data_plane; });
      auto anchor = pick([](const veth_round& r) { return r.iperf3; });
      auto burst = pick([](const veth_round& r) { return r.iperf3_burst; });
      auto raw = pick([](const veth_round& r) { return r.raw_tcp; });
      // The TLS testbed is another one: its streams against the plain ones'
      // (medians, or fastest rounds), not paired by round.
      auto tls_m = median_and_fastest(tls_veth.rounds[i],
                                      [](const veth_round& r) { return r.data_plane; });
      auto tls = fastest ? tls_m.second : tls_m.first;
      // Median ratios pair each round's own columns; the fastest row divides
      // the fastest rounds.
      auto ratio = [&](double (*of)(const veth_round&), double fastest_anchor) {
        if (fastest)
          return fastest_anchor > 0 ? dp / fastest_anchor : 0.0;
        return median_and_fastest(rounds, [of](const veth_round& r) {
                 return of(r) > 0 ? r.data_plane / of(r) : 0.0;
               }).first;
      };
      std::printf("| %d MiB%s | %.1f | %.1f | %.1f | %.3f | %.1f | %.3f | %.1f | %.3f | %.3f |\n",
                  i == 0 ? 1 : 16, fastest ? ", fastest round" : ", median", dp, tls, anchor,
                  ratio([](const veth_round& r) { return r.iperf3; }, anchor), burst,
                  ratio([](const veth_round& r) { return r.iperf3_burst; }, burst), raw,
                  ratio([](const veth_round& r) { return r.raw_tcp; }, raw),
                  dp > 0 ? tls / dp : 0.0);
    }
  // Every round of the plain testbed, so that a run's spread over the veth
  // (twofold on some hosts) can be read, not only its medians.
  std::printf("\nEvery round over the plain veth, in the order run, Mbit/s:\n\n"
              "| size | round | data plane | iperf3 3 s | iperf3, the stream's bytes | raw TCP | "
              "data plane / iperf3 | data plane / raw TCP |\n|---|---|---|---|---|---|---|---|\n");
  for (int i = 0; i < 2; ++i)
    for (size_t k = 0; k < plain_veth.rounds[i].size(); ++k) {
      const auto& r = plain_veth.rounds[i][k];
      std::printf("| %d MiB | %zu | %.1f | %.1f | %.1f | %.1f | %.3f | %.3f |\n", i == 0 ? 1 : 16,
                  k + 1, r.data_plane, r.iperf3, r.iperf3_burst, r.raw_tcp,
                  r.iperf3 > 0 ? r.data_plane / r.iperf3 : 0.0,
                  r.raw_tcp > 0 ? r.data_plane / r.raw_tcp : 0.0);
    }
  if (!tls_veth.problem.empty())
    std::printf("\nTLS over the veth not measured: %s\n", tls_veth.problem.c_str());
  return 0;
}
