// Does this host's core compute as fast right after it slept as it does
// back to back? An emulated device (asteroid node --slowdown) computes a
// request, then sleeps out the rest of its emulated time, and its padding
// scales the compute thread's CPU time; the planner's profile is taken with
// passes back to back. This times the same pass both ways, alternating, on
// one LibTorch thread as the nodes compute, in wall and thread CPU time
// (docs/benchmarks.md, serve_bench).
#include "../median.hpp"

#include <CLI/CLI.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <thread>
#include <vector>

namespace {

using asteroid::bench::median;

/// CPU time of the calling thread, what an emulated device's padding scales.
double thread_cpu_s() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"A core's compute right after sleeping against back to back"};
  double sleep_s = 8;
  int rounds = 5;
  app.add_option("--sleep", sleep_s, "Seconds asleep before each timed pass")
    ->check(CLI::NonNegativeNumber)
    ->capture_default_str();
  app.add_option("--rounds", rounds, "Passes timed each way")
    ->check(CLI::PositiveNumber)
    ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  at::set_num_threads(1);
  torch::NoGradGuard no_grad;
  // ViT-L/16's 24 MLP blocks at 5 tokens (32x32 images): 800 MB of weights,
  // about 2 GFLOP per pass.
  std::vector<torch::Tensor> weights;
  for (int i = 0; i < 24; ++i) {
    weights.push_back(torch::randn({1024, 4096}));
    weights.push_back(torch::randn({4096, 1024}));
  }
  const auto input = torch::randn({5, 1024});
  struct seconds {
    double wall, cpu;
  };
  auto timed_pass = [&] {
    auto t0 = std::chrono::steady_clock::now();
    const double cpu0 = thread_cpu_s();
    auto x = input;
    for (const auto& w : weights)
      x = torch::mm(x, w).tanh_();
    x.sum().item<double>();
    return seconds{
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
      thread_cpu_s() - cpu0};
  };
  for (int i = 0; i < 3; ++i)
    timed_pass();
  std::vector<double> busy_wall, busy_cpu, idle_wall, idle_cpu;
  for (int r = 0; r < rounds; ++r) {
    timed_pass(); // the core busy again before the back-to-back one
    const auto busy = timed_pass();
    std::this_thread::sleep_for(std::chrono::duration<double>(sleep_s));
    const auto idle = timed_pass();
    busy_wall.push_back(busy.wall);
    busy_cpu.push_back(busy.cpu);
    idle_wall.push_back(idle.wall);
    idle_cpu.push_back(idle.cpu);
    std::printf("round %d: back to back %.3f s (CPU %.3f s), after %.1f s asleep %.3f s "
                "(CPU %.3f s)\n",
                r, busy.wall, busy.cpu, sleep_s, idle.wall, idle.cpu);
    std::fflush(stdout);
  }
  std::printf("median of %d rounds, %.1f s asleep: back to back %.3f s (CPU %.3f s), after "
              "sleeping %.3f s (CPU %.3f s): %.3f x wall, %.3f x CPU\n",
              rounds, sleep_s, median(busy_wall), median(busy_cpu), median(idle_wall),
              median(idle_cpu), median(idle_wall) / median(busy_wall),
              median(idle_cpu) / median(busy_cpu));
  return 0;
}
