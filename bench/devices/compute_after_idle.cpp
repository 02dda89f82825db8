// Does this host's core compute as fast right after it slept as it does
// back to back? An emulated device (asteroid node --slowdown) computes a
// request, then sleeps out the rest of its emulated time, and its padding
// scales whatever the compute took; the planner's profile is taken with
// passes back to back. This times the same pass both ways, alternating, on
// one LibTorch thread as the nodes compute (docs/benchmarks.md, serve_bench).
#include <CLI/CLI.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

namespace {

double median(std::vector<double> xs) {
  std::sort(xs.begin(), xs.end());
  const auto n = xs.size();
  return n % 2 ? xs[n / 2] : 0.5 * (xs[n / 2 - 1] + xs[n / 2]);
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"A core's compute right after sleeping against back to back"};
  double sleep_s = 8;
  int rounds = 5;
  app.add_option("--sleep", sleep_s, "Seconds asleep before each timed pass")
    ->capture_default_str();
  app.add_option("--rounds", rounds, "Passes timed each way")->capture_default_str();
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
  auto timed_pass = [&] {
    auto t0 = std::chrono::steady_clock::now();
    auto x = input;
    for (const auto& w : weights)
      x = torch::mm(x, w).tanh_();
    x.sum().item<double>();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  for (int i = 0; i < 3; ++i)
    timed_pass();
  std::vector<double> back_to_back, after_sleep;
  for (int r = 0; r < rounds; ++r) {
    timed_pass(); // the core busy again before the back-to-back one
    back_to_back.push_back(timed_pass());
    std::this_thread::sleep_for(std::chrono::duration<double>(sleep_s));
    after_sleep.push_back(timed_pass());
    std::printf("round %d: back to back %.3f s, after %.1f s asleep %.3f s\n", r,
                back_to_back.back(), sleep_s, after_sleep.back());
    std::fflush(stdout);
  }
  const double busy = median(back_to_back), idle = median(after_sleep);
  std::printf("median: back to back %.3f s, after sleeping %.3f s: %.3f x\n", busy, idle,
              idle / busy);
  return 0;
}
