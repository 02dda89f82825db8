// Planner benchmark.
//
//   planner_bench --table     environments A-D x {100,1000} Mbps x 4 models:
//                             predicted samples/s of every planner and
//                             Asteroid's speedups (analytic profiles)
//   planner_bench --random N  Asteroid vs exhaustive on N random instances,
//                             default options and named orderings only
//   planner_bench --agreement [N]  analytic round latency vs the simulated
//                             1F1B round of every planner's plan on A-D, and
//                             on N random pipelines (default 4000)
//   planner_bench --paper-exact  Asteroid vs exhaustive search on the paper's
//                             environments A-D x {100,1000} Mbps x 4 models x
//                             batch {16,32} (analytic profiles)
//   planner_bench --dp-batch   Asteroid's predicted speedup over even DP at
//                             batch 16-512 on Table 4's rows, next to the
//                             paper's DP column
//   planner_bench --inference  ViT-L/16 inference pipelines (EdgePipe's DP)
//                             on 1-16 devices: predicted samples/s against
//                             the baselines, and planning time
//   planner_bench [gbench flags]  planning time, ResNet-50, 16 and 32 devices,
//                             and ViT-L/16 inference on 16 devices
//
// With no flag it runs all seven. All numbers are predictions of the cost
// model on ANALYTIC profiles (see docs/planner.md), not measured training.

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "../../tests/planner/test_helpers.hpp"
#include "asteroid/planner/analytic_profiles.hpp"
#include "asteroid/planner/asteroid_planner.hpp"
#include "asteroid/planner/cost_model.hpp"
#include "asteroid/planner/device_catalog.hpp"
#include "asteroid/planner/error.hpp"
#include "asteroid/planner/exhaustive_planner.hpp"
#include "asteroid/planner/inference_planner.hpp"
#include "asteroid/planner/json_io.hpp"
#include "asteroid/planner/planner.hpp"
#include "asteroid/planner/schedule.hpp"
#include "asteroid/planner/simulator.hpp"

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

void bm_plan_inference_vit_large(benchmark::State& state) {
  auto prof = analytic_profile("vit-large");
  auto c = big_cluster(static_cast<int>(state.range(0)));
  inference_options o;
  double sps = 0;
  for (auto _ : state) {
    auto p = plan_inference(prof, c, o);
    sps = p.samples_per_s;
    benchmark::DoNotOptimize(p);
  }
  state.counters["samples_per_s"] = sps;
  state.counters["layers"] = prof.num_layers();
}
BENCHMARK(bm_plan_inference_vit_large)->Arg(16)->Unit(benchmark::kMillisecond)->Iterations(3);

// ViT-L/16 inference on the first n devices of big_cluster (the types
// repeat nx, tx2, nano, nano), micro-batch 8: every planner's prediction.
void print_inference_table() {
  auto prof = analytic_profile("vit-large");
  inference_options o;
  std::printf("ViT-L/16 inference, micro-batch %lld, 1 Gbit/s links, analytic profile "
              "(predictions of the inference cost model, not measurements)\n",
              static_cast<long long>(o.micro_batch));
  std::printf("%8s %14s %10s %14s %14s %12s %12s\n", "devices", "edgepipe s/s", "stages",
              "straight s/s", "on-device s/s", "speedup", "plan ms");
  for (int n : {1, 2, 4, 8, 16}) {
    auto c = big_cluster(n);
    auto t0 = std::chrono::steady_clock::now();
    std::string best_sps = "-", stages = "-";
    double best = 0.0;
    try {
      auto p = plan_inference(prof, c, o);
      best = p.samples_per_s;
      best_sps = std::to_string(p.samples_per_s).substr(0, 8);
      stages = std::to_string(p.num_stages());
    } catch (const planner_error&) {
    }
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                  .count();
    auto straight = plan_inference_straight(prof, c, o);
    std::string straight_sps = inference_fits_memory(straight, c)
                                 ? std::to_string(straight.samples_per_s).substr(0, 8)
                                 : "no fit";
    // Speedup over the fastest device of the whole 16-device cluster that
    // holds the model by itself.
    double alone = 0.0;
    try {
      alone = plan_inference_on_device(prof, big_cluster(16), o).samples_per_s;
    } catch (const planner_error&) {
    }
    std::string on_device = "no fit";
    try {
      on_device = std::to_string(plan_inference_on_device(prof, c, o).samples_per_s).substr(0, 8);
    } catch (const planner_error&) {
    }
    std::printf("%8d %14s %10s %14s %14s %12s %12.2f\n", n, best_sps.c_str(), stages.c_str(),
                straight_sps.c_str(), on_device.c_str(),
                alone > 0 && best > 0 ? (std::to_string(best / alone).substr(0, 5) + "x").c_str()
                                      : "-",
                ms);
  }
  std::printf("\n");
}

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
        auto c = asteroid::planner::test::paper_environment(env, mbps, prof);
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

// The DP's summary of a pipeline, built stage by stage from the back: its
// period Pi and busiest step D, for the "busiest step only" comparison.
pipeline_summary summarise(const pipeline_steps& ps) {
  const auto& st = ps.steps;
  auto sum = pipeline_summary::stage(st.back().forward_s, st.back().backward_s,
                                     st.back().end_of_round_s(), ps.micro_batches);
  for (int k = static_cast<int>(st.size()) - 3; k >= 0; k -= 2)
    sum = sum.prepend(st[k].forward_s, st[k].backward_s, st[k].end_of_round_s(),
                      st[k + 1].forward_s, st[k + 1].backward_s);
  return sum;
}

// Round latency with the busiest step as the period (no 1F1B window
// cycles): the cost model before window cycles, SFB + (M-1) D + Z.
double busiest_step_latency(const pipeline_steps& ps) {
  auto s = summarise(ps);
  return s.SFB + (ps.micro_batches - 1) * s.D + s.Z;
}

double simulated_round(const plan& p, const pipeline_steps& steps, schedule_kind kind,
                       link_model links) {
  simulator_options opt;
  opt.links = links;
  opt.record_events = false;
  return simulate(p, steps, kind, opt).round_s;
}

struct gap_tally {
  int cases = 0, within = 0;
  double worst = 0.0, sum = 0.0;
  double lo = std::numeric_limits<double>::infinity();
  double hi = -std::numeric_limits<double>::infinity();
  std::string worst_case;
  void add(double gap, const std::string& where = "") {
    ++cases;
    within += std::abs(gap) <= 0.05;
    sum += gap;
    lo = std::min(lo, gap);
    hi = std::max(hi, gap);
    if (std::abs(gap) >= std::abs(worst)) {
      worst = gap;
      worst_case = where;
    }
  }
};

// Analytic round latency (cost model) vs the discrete-event simulation of the
// plan's 1F1B streams under the same step times, for every planner's plan on
// environments A-D. Half-duplex links are what the step model charges (a
// link is busy E_f + E_b per micro-batch) and the simulator's default; the
// full-duplex column shows how much of a gap is FIFO contention on a shared
// link. "busiest" is the formula with the busiest step as the period (no
// window cycles), for comparison.
void print_agreement_table() {
  const std::vector<std::string> planners = {"asteroid", "on-device", "dp-even",
                                             "dp-proportional", "pp", "pipedream",
                                             "ftpipehd", "pipeedge"};
  std::map<std::string, gap_tally> half, full, busiest;
  std::printf("Analytic round latency (cost_model round_latency) vs simulated 1F1B round "
              "(simulate over compile_schedule); gap = (analytic - sim) / sim\n");
  std::printf("%-4s %-5s %-16s %-16s %3s %3s %12s %12s %8s %12s %8s %12s %8s\n", "env", "link",
              "model", "planner", "P", "M", "analytic ms", "sim half ms", "gap %", "sim full ms",
              "gap %", "busiest ms", "gap %");
  for (const auto& model : analytic_model_names()) {
    auto prof = analytic_profile(model);
    for (const char* env : {"a", "b", "c", "d"})
      for (int mbps : {100, 1000}) {
        std::string name = std::string("env-") + env + "-" + std::to_string(mbps) + "mbps";
        auto c = asteroid::planner::test::paper_environment(env, mbps, prof);
        for (const auto& planner : planners) {
          plan p;
          try {
            p = make_planner(planner)->make_plan(prof, c, 32);
          } catch (const planner_error&) {
            std::printf("%-4s %-5d %-16s %-16s infeasible\n", env, mbps, model.c_str(),
                        planner.c_str());
            continue;
          }
          auto steps = make_steps(p, prof, c);
          const double analytic = round_latency(steps);
          const double old = busiest_step_latency(steps);
          const double sh =
            simulated_round(p, steps, schedule_kind::one_f_one_b, link_model::half_duplex);
          const double sf =
            simulated_round(p, steps, schedule_kind::one_f_one_b, link_model::full_duplex);
          std::printf("%-4s %-5d %-16s %-16s %3d %3d %12.1f %12.1f %+8.2f %12.1f %+8.2f %12.1f "
                      "%+8.2f\n",
                      env, mbps, model.c_str(), planner.c_str(), p.num_stages(),
                      p.micro_batches, 1e3 * analytic, 1e3 * sh, 100.0 * (analytic - sh) / sh,
                      1e3 * sf, 100.0 * (analytic - sf) / sf, 1e3 * old,
                      100.0 * (old - sh) / sh);
          const std::string where = model + " " + name;
          half[planner].add((analytic - sh) / sh, where);
          full[planner].add((analytic - sf) / sf, where);
          busiest[planner].add((old - sh) / sh, where);
        }
      }
  }
  auto summary = [&](const char* what, std::map<std::string, gap_tally>& by) {
    std::printf("\nsummary (%s): %-16s %5s %9s %10s %9s  %s\n", what, "planner", "cases",
                "within 5%", "mean gap", "worst", "worst case");
    for (const auto& planner : planners) {
      const auto& t = by[planner];
      std::printf("summary (%s): %-16s %5d %9d %+9.2f%% %+8.2f%%  %s\n", what, planner.c_str(),
                  t.cases, t.within, 100.0 * t.sum / std::max(1, t.cases), 100.0 * t.worst,
                  t.worst_case.c_str());
    }
  };
  summary("analytic vs half duplex", half);
  summary("analytic vs full duplex", full);
  summary("busiest-step formula vs half duplex", busiest);
  std::printf("\n");
}

// The same comparison on random pipelines: P 1..6 stages of 1-3 replicas
// (uneven per-replica times, all-reduce 0-3 s when replicated), links
// 0-0.3 s or 0-1.5 s per direction, M 1..12, compute F 0.1-2 s, B 1-2x F.
void print_agreement_sweep(int n) {
  std::mt19937 rng(20240901);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  gap_tally t[2][4]; // [formula: analytic, busiest][1f1b half, 1f1b full, gpipe half, gpipe full]
  gap_tally windowed[2], unwindowed[2]; // 1F1B half duplex, by whether Pi > D
  for (int trial = 0; trial < n; ++trial) {
    const int P = 1 + static_cast<int>(rng() % 6);
    pipeline_steps ps;
    ps.micro_batches = 1 + static_cast<int>(rng() % 12);
    plan p;
    p.planner = "sweep";
    p.micro_batches = ps.micro_batches;
    p.batch_size = 6 * ps.micro_batches;
    int device = 0;
    for (int s = 0; s < P; ++s) {
      pipeline_step c;
      c.stage = s;
      const int g = 1 + static_cast<int>(rng() % 3);
      const double f = 0.1 + 1.9 * u(rng), ratio = 1.0 + u(rng);
      stage_plan sp{s, s + 1, {}, {}};
      for (int r = 0; r < g; ++r) {
        const double jitter = 1.0 + 0.3 * u(rng);
        c.device_forward_s.push_back(f * jitter);
        c.device_backward_s.push_back(f * ratio * jitter);
        c.devices.push_back(device);
        sp.devices.push_back(device++);
        sp.shares.push_back(6 / g);
      }
      c.forward_s = *std::max_element(c.device_forward_s.begin(), c.device_forward_s.end());
      c.backward_s = *std::max_element(c.device_backward_s.begin(), c.device_backward_s.end());
      c.allreduce_s = g > 1 ? 3.0 * u(rng) : 0.0;
      ps.steps.push_back(c);
      p.stages.push_back(sp);
      if (s + 1 < P) {
        pipeline_step l;
        l.type = pipeline_step::kind::communication;
        l.stage = s;
        l.forward_s = l.backward_s = u(rng) < 0.5 ? 0.3 * u(rng) : 1.5 * u(rng);
        ps.steps.push_back(l);
      }
    }
    const double formula[2] = {round_latency(ps), busiest_step_latency(ps)};
    const double sim[4] = {
      simulated_round(p, ps, schedule_kind::one_f_one_b, link_model::half_duplex),
      simulated_round(p, ps, schedule_kind::one_f_one_b, link_model::full_duplex),
      simulated_round(p, ps, schedule_kind::gpipe, link_model::half_duplex),
      simulated_round(p, ps, schedule_kind::gpipe, link_model::full_duplex)};
    auto sum = summarise(ps);
    for (int f = 0; f < 2; ++f) {
      for (int k = 0; k < 4; ++k)
        t[f][k].add((formula[f] - sim[k]) / sim[k]);
      (sum.Pi > sum.D * 1.001 ? windowed : unwindowed)[f].add((formula[f] - sim[0]) / sim[0]);
    }
  }
  std::printf("Random pipelines (%d): gap = (formula - sim) / sim\n", n);
  const char* formula_name[2] = {"round_latency", "busiest step"};
  const char* sim_name[4] = {"1F1B, half duplex", "1F1B, full duplex", "GPipe, half duplex",
                             "GPipe, full duplex"};
  auto line = [](const char* a, const char* b, const gap_tally& g) {
    std::printf("  %-14s vs %-34s n=%5d within 5%% %5.1f%%  mean %+6.1f%%  range %+6.1f%% .. "
                "%+6.1f%%\n",
                a, b, g.cases, 100.0 * g.within / std::max(1, g.cases),
                100.0 * g.sum / std::max(1, g.cases), 100.0 * g.lo, 100.0 * g.hi);
  };
  for (int f = 0; f < 2; ++f) {
    for (int k = 0; k < 4; ++k)
      line(formula_name[f], sim_name[k], t[f][k]);
    line(formula_name[f], "1F1B half, window-paced (Pi > D)", windowed[f]);
    line(formula_name[f], "1F1B half, busiest-step-paced", unwindowed[f]);
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

// Table 4's DP column depends on the batch size: data parallelism
// all-reduces the whole model once per mini-batch, so the larger the batch,
// the less that costs per sample. For each row the paper reports, Asteroid's
// predicted speedup over even DP at batch sizes 16-512, and the batch whose
// speedup is closest to the paper's (analytic profiles: predictions).
void print_dp_batch_sweep() {
  struct row {
    const char* env;
    int mbps;
    const char* model;
    double paper_dp;
  };
  const row rows[] = {{"a", 100, "efficientnet-b1", 2.1}, {"b", 100, "efficientnet-b1", 4.8},
                      {"b", 1000, "efficientnet-b1", 2.1}, {"a", 100, "mobilenetv2", 1.5},
                      {"b", 100, "mobilenetv2", 2.3},      {"b", 1000, "mobilenetv2", 1.2},
                      {"a", 100, "resnet50", 3.6},         {"b", 100, "resnet50", 6.1},
                      {"b", 1000, "resnet50", 2.9},        {"a", 100, "bert-small", 6.4},
                      {"b", 100, "bert-small", 6.8},       {"b", 1000, "bert-small", 4.2}};
  const int64_t batches[] = {16, 32, 64, 128, 256, 512};
  std::printf("Asteroid's predicted speedup over even data parallelism by batch size (analytic "
              "profiles), next to the paper's Table 4 DP column\n");
  std::printf("%-16s %-4s %5s", "model", "env", "Mbps");
  for (auto b : batches)
    std::printf(" %7lld", static_cast<long long>(b));
  std::printf(" %6s %11s\n", "paper", "closest at");
  for (const auto& r : rows) {
    auto prof = analytic_profile(r.model);
    auto c = asteroid::planner::test::paper_environment(r.env, r.mbps, prof);
    std::printf("%-16s %-4s %5d", r.model, r.env, r.mbps);
    int64_t closest = 0;
    double gap = std::numeric_limits<double>::infinity();
    for (auto b : batches) {
      try {
        auto ours = make_planner("asteroid")->make_plan(prof, c, b);
        auto dp = make_planner("dp-even")->make_plan(prof, c, b);
        double x = ours.predicted_samples_per_s / dp.predicted_samples_per_s;
        std::printf(" %6.2fx", x);
        if (std::abs(x - r.paper_dp) < gap) {
          gap = std::abs(x - r.paper_dp);
          closest = b;
        }
      } catch (const planner_error&) {
        std::printf(" %7s", "-");
      }
    }
    std::printf(" %5.1fx %11lld\n", r.paper_dp, static_cast<long long>(closest));
  }
  std::printf("\n");
}

// The paper's environments, judged by the exhaustive search: Asteroid's
// plan must be the optimum on every instance (issue: "an exact planner").
void print_paper_exact() {
  exhaustive_planner exhaustive(int64_t{4'000'000'000});
  int instances = 0, exact = 0, judged = 0;
  double worst = 1.0, worst_ms = 0.0;
  std::printf("Asteroid vs exhaustive search on the paper's environments (analytic profiles)\n");
  std::printf("%-16s %-15s %5s %12s %12s %8s %9s %12s\n", "model", "environment", "batch",
              "asteroid", "exhaustive", "ratio", "plan ms", "exhaust. ms");
  for (const auto& model : analytic_model_names()) {
    auto prof = analytic_profile(model);
    for (const char* env : {"a", "b", "c", "d"})
      for (int mbps : {100, 1000})
        for (int64_t batch : {16, 32}) {
          std::string name = std::string("env-") + env + "-" + std::to_string(mbps) + "mbps";
          auto c = asteroid::planner::test::paper_environment(env, mbps, prof);
          ++instances;
          auto t0 = std::chrono::steady_clock::now();
          plan as, ex;
          bool as_ok = true, ex_ok = true;
          try {
            as = make_planner("asteroid")->make_plan(prof, c, batch);
          } catch (const planner_error&) {
            as_ok = false;
          }
          auto t1 = std::chrono::steady_clock::now();
          std::string why;
          try {
            ex = exhaustive.make_plan(prof, c, batch);
          } catch (const planner_error& e) {
            ex_ok = false;
            why = e.what();
          }
          auto t2 = std::chrono::steady_clock::now();
          const double ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
          const double ex_ms = std::chrono::duration<double, std::milli>(t2 - t1).count();
          worst_ms = std::max(worst_ms, ms);
          if (!ex_ok) {
            std::printf("%-16s %-15s %5lld %12s %12s  (%s)\n", model.c_str(), name.c_str(),
                        static_cast<long long>(batch),
                        as_ok ? std::to_string(as.predicted_samples_per_s).c_str() : "infeasible",
                        "not judged", why.c_str());
            continue;
          }
          ++judged;
          const double r = as_ok ? as.predicted_round_s / ex.predicted_round_s
                                 : std::numeric_limits<double>::infinity();
          exact += r <= 1.0 + 1e-9;
          worst = std::max(worst, r);
          std::printf("%-16s %-15s %5lld %12.3f %12.3f %8.5f %9.1f %12.1f%s\n", model.c_str(),
                      name.c_str(), static_cast<long long>(batch),
                      as_ok ? as.predicted_samples_per_s : 0.0, ex.predicted_samples_per_s, r, ms,
                      ex_ms, r <= 1.0 + 1e-9 ? "" : "  MISSED");
        }
  }
  std::printf("paper instances: %d, judged by exhaustive search %d, asteroid optimal on %d, "
              "worst ratio %.5f, slowest asteroid plan %.1f ms\n\n",
              instances, judged, exact, worst, worst_ms);
}

} // namespace

int main(int argc, char** argv) {
  bool table = false, random = false, timing = false, agreement = false, inference = false,
       paper_exact = false, dp_batch = false;
  int agreement_n = 4000;
  int random_n = 1000;
  std::vector<char*> rest = {argv[0]};
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--table") == 0) {
      table = true;
    } else if (std::strcmp(argv[i], "--agreement") == 0) {
      agreement = true;
      if (i + 1 < argc && std::isdigit(static_cast<unsigned char>(argv[i + 1][0])))
        agreement_n = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--inference") == 0) {
      inference = true;
    } else if (std::strcmp(argv[i], "--paper-exact") == 0) {
      paper_exact = true;
    } else if (std::strcmp(argv[i], "--dp-batch") == 0) {
      dp_batch = true;
    } else if (std::strcmp(argv[i], "--random") == 0 && i + 1 < argc) {
      random = true;
      random_n = std::atoi(argv[++i]);
    } else {
      timing = true;
      rest.push_back(argv[i]);
    }
  }
  if (!table && !random && !timing && !agreement && !inference && !paper_exact && !dp_batch)
    table = random = timing = agreement = inference = paper_exact = dp_batch = true;
  if (table)
    print_table();
  if (paper_exact)
    print_paper_exact();
  if (dp_batch)
    print_dp_batch_sweep();
  if (inference)
    print_inference_table();
  if (agreement) {
    print_agreement_table();
    print_agreement_sweep(agreement_n);
  }
  if (random) {
    random_stats(random_n, asteroid_options{}, "default options");
    asteroid_options named;
    named.enumerate_orderings_up_to = 0; // named orderings + local search only
    random_stats(random_n, named, "named orderings + local search");
    asteroid_options single;
    single.enumerate_orderings_up_to = 0;
    single.orderings = {"memory"};
    single.local_search_passes = 0;
    random_stats(random_n, single, "memory ordering only (the paper's Algorithm 2)");
  }
  if (timing) {
    int rc = static_cast<int>(rest.size());
    benchmark::Initialize(&rc, rest.data());
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
  }
  return 0;
}
