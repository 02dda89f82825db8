// Planner benchmark.
//
//   planner_bench --table     environments A-D x {100,1000} Mbps x 4 models:
//                             predicted samples/s of every planner and
//                             Asteroid's speedups (analytic profiles)
//   planner_bench --random N  Asteroid vs exhaustive on N random instances,
//                             default options and named orderings only
//   planner_bench [gbench flags]  planning time, ResNet-50, 16 and 32 devices
//
// With no flag it runs all three. All numbers are predictions of the cost
// model on ANALYTIC profiles (see docs/planner.md), not measured training.

#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "../../tests/planner/test_helpers.hpp"
#include "asteroid/planner/analytic_profiles.hpp"
#include "asteroid/planner/asteroid_planner.hpp"
#include "asteroid/planner/device_catalog.hpp"
#include "asteroid/planner/error.hpp"
#include "asteroid/planner/exhaustive_planner.hpp"
#include "asteroid/planner/json_io.hpp"
#include "asteroid/planner/planner.hpp"

using namespace asteroid::planner;

namespace {

// 16 or 32 devices: a quarter Xavier NX, a quarter TX2, half Nano, 1 Gbit/s.
cluster big_cluster(int n) {
  std::vector<device_spec> d;
  const char* types[] = {"xavier-nx", "jetson-tx2", "jetson-nano", "jetson-nano"};
  for (int i = 0; i < n; ++i)
    d.push_back(make_device("d" + std::to_string(i), types[i % 4]));
  return cluster::uniform("mixed-" + std::to_string(n), d, 1e9);
}

void bm_plan_resnet50(benchmark::State& state) {
  auto prof = analytic_profile("resnet50");
  auto c = big_cluster(static_cast<int>(state.range(0)));
  asteroid_planner planner;
  double sps = 0;
  for (auto _ : state) {
    auto p = planner.make_plan(prof, c, 32);
    sps = p.predicted_samples_per_s;
    benchmark::DoNotOptimize(p);
  }
  state.counters["samples_per_s"] = sps;
  state.counters["layers"] = prof.num_layers();
}
BENCHMARK(bm_plan_resnet50)->Arg(16)->Arg(32)->Unit(benchmark::kMillisecond)->Iterations(3);

void print_table() {
  const std::vector<std::string> baselines = {"on-device", "dp-even",  "dp-proportional", "pp",
                                              "pipedream", "ftpipehd", "pipeedge"};
  std::printf("Predicted throughput (samples/s, batch 32, analytic profiles) and Asteroid's "
              "speedup over each baseline\n");
  std::printf("%-16s %-15s %9s", "model", "environment", "asteroid");
  for (const auto& b : baselines)
    std::printf(" %16s", b.c_str());
  std::printf(" %6s %3s %9s\n", "stages", "M", "plan ms");
  for (const auto& model : analytic_model_names()) {
    auto prof = analytic_profile(model);
    for (const char* env : {"a", "b", "c", "d"})
      for (int mbps : {100, 1000}) {
        std::string name = std::string("env-") + env + "-" + std::to_string(mbps) + "mbps";
        auto c = rebase_speeds(
          load_cluster_file(std::string(ASTEROID_SOURCE_DIR) + "/examples/clusters/" + name +
                            ".json"),
          prof);
        auto t0 = std::chrono::steady_clock::now();
        auto best = make_planner("asteroid")->make_plan(prof, c, 32);
        double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        std::printf("%-16s %-15s %9.2f", model.c_str(), name.c_str(),
                    best.predicted_samples_per_s);
        for (const auto& b : baselines) {
          try {
            auto p = make_planner(b)->make_plan(prof, c, 32);
            char cell[64];
            std::snprintf(cell, sizeof(cell), "%.2f (%.2fx)", p.predicted_samples_per_s,
                          best.predicted_samples_per_s / p.predicted_samples_per_s);
            std::printf(" %16s", cell);
          } catch (const planner_error&) {
            std::printf(" %16s", "infeasible");
          }
        }
        std::printf(" %6d %3d %9.1f\n", best.num_stages(), best.micro_batches, ms);
      }
  }
  std::printf("\n");
}

void random_stats(int n, const asteroid_options& options, const char* label) {
  std::mt19937_64 rng(20240901);
  asteroid_planner asteroid(options);
  exhaustive_planner exhaustive;
  int feasible = 0, within = 0, within_half = 0, missed = 0;
  double worst = 1.0, sum_ratio = 0.0, t_as = 0.0, t_ex = 0.0;
  for (int k = 0; k < n; ++k) {
    auto inst = asteroid::planner::test::make_random_instance(rng, 8, 5);
    plan ex, as;
    bool ex_ok = true, as_ok = true;
    auto t0 = std::chrono::steady_clock::now();
    try {
      ex = exhaustive.make_plan(inst.profile, inst.c, inst.batch);
    } catch (const planner_error&) {
      ex_ok = false;
    }
    auto t1 = std::chrono::steady_clock::now();
    try {
      as = asteroid.make_plan(inst.profile, inst.c, inst.batch);
    } catch (const planner_error&) {
      as_ok = false;
    }
    auto t2 = std::chrono::steady_clock::now();
    t_ex += std::chrono::duration<double>(t1 - t0).count();
    t_as += std::chrono::duration<double>(t2 - t1).count();
    if (!ex_ok)
      continue;
    ++feasible;
    if (!as_ok) {
      ++missed;
      continue;
    }
    double r = as.predicted_round_s / ex.predicted_round_s;
    worst = std::max(worst, r);
    sum_ratio += r;
    within += r <= 1.02;
    within_half += r <= 1.005;
  }
  std::printf("[%s] %d instances, %d feasible: within 2%% %.1f%%, within 0.5%% %.1f%%, "
              "mean ratio %.4f, worst %.4f, infeasible-but-exhaustive-found %d; planning "
              "%.2f ms/instance (exhaustive %.2f ms)\n",
              label, n, feasible, 100.0 * within / feasible, 100.0 * within_half / feasible,
              sum_ratio / std::max(1, feasible - missed), worst, missed, 1e3 * t_as / n,
              1e3 * t_ex / n);
}

} // namespace

int main(int argc, char** argv) {
  bool table = false, random = false, timing = false;
  int random_n = 1000;
  std::vector<char*> rest = {argv[0]};
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--table") == 0) {
      table = true;
    } else if (std::strcmp(argv[i], "--random") == 0 && i + 1 < argc) {
      random = true;
      random_n = std::atoi(argv[++i]);
    } else {
      timing = true;
      rest.push_back(argv[i]);
    }
  }
  if (!table && !random && !timing)
    table = random = timing = true;
  if (table)
    print_table();
  if (random) {
    random_stats(random_n, asteroid_options{}, "default options");
    asteroid_options named;
    named.enumerate_orderings_up_to = 0; // named orderings + local search only
    random_stats(random_n, named, "named orderings + local search");
    asteroid_options single;
    single.enumerate_orderings_up_to = 0;
    single.orderings = {"memory"};
    single.local_search_passes = 0;
    random_stats(random_n, single, "memory ordering only (background.md)");
  }
  if (timing) {
    int rc = static_cast<int>(rest.size());
    benchmark::Initialize(&rc, rest.data());
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
  }
  return 0;
}
