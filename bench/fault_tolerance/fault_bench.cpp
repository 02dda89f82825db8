// Recovery benchmark. One invocation runs the same fault (a node of the plan
// is SIGKILLed at a fixed step) under each recovery mode on a fresh local
// cluster, plus a fault-free run of a fresh plan on the survivors, and prints
// side by side:
//   detection time, time from the kill to the first completed step, the
//   recovery's own time, steps re-run, and throughput after recovery as a
//   fraction of the fresh plan's.
// `--case` picks the plan and the victim: "planned" (the Asteroid planner's
// plan for the four devices, the last member of a replicated stage killed),
// or a hand-written 3-stage pipeline of the cnn (stage 0 on node0, stage 1
// on node1 + node2, stage 2 on node3) with the single-device last stage
// killed ("pipeline-single") or a member of the replicated middle stage
// ("pipeline-replicated").
// Nodes are local processes on loopback; "slowdown" factors are emulated.
#include "../median.hpp"

#include "asteroid/actors/job.hpp"
#include "asteroid/actors/node.hpp"
#include "asteroid/data/make_dataset.hpp"
#include "asteroid/kernels/allocator.hpp"
#include "asteroid/planner/json_io.hpp"
#include "asteroid/planner/planner.hpp"
#include "asteroid/training/model_registry.hpp"
#include "asteroid/training/profiler.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <numeric>

using namespace asteroid;
using nlohmann::json;

namespace {

struct outcome {
  std::string mode;
  double detect_s = -1, resumed_s = -1, caught_up_s = -1, recover_s = -1;
  int64_t rerun = 0;
  /// Replicas that kept running across the recovery, of those deployed.
  int64_t kept = 0, replicas = 0;
  double after_sps = 0;   ///< median samples/s of the steps after recovery
  double before_sps = 0;  ///< median samples/s before the fault
  std::vector<double> timeline; ///< per-step samples/s
  std::vector<double> at_s;     ///< when each step ended, seconds since the start
};

using asteroid::bench::median;

const json* event(const actors::job_result& r, const std::string& what) {
  for (auto& e : r.fault_events)
    if (e["event"] == what)
      return &e;
  return nullptr;
}

actors::job_result run(actors::job_spec job, int nodes, uint16_t port,
                       const std::vector<double>& slowdowns,
                       std::shared_ptr<data::dataset> train) {
  actors::local_cluster::options o;
  o.exe = ASTEROID_CLI_PATH;
  o.nodes = nodes;
  o.base_port = port;
  o.slowdowns = slowdowns;
  actors::local_cluster cluster{o};
  job.nodes = cluster.endpoints();
  caf::actor_system_config cfg;
  actors::configure(cfg);
  caf::actor_system sys{cfg};
  auto devices = actors::connect_all(sys, job.nodes, std::chrono::seconds(3));
  torch::manual_seed(job.seed);
  auto model = training::build_model(job.model, job.model_options);
  return actors::run_job(sys, job, devices, model, train, nullptr);
}

} // namespace

int main(int argc, char** argv) {
  kernels::keep_tensor_buffers_in_heap(); // as every asteroid process
  CLI::App app{"Asteroid recovery benchmark: lightweight replay vs heavy "
               "re-plan vs restart-from-checkpoint for the same fault"};
  std::string model = "cnn";
  int64_t steps = 60, fault_step = 45, batch = 64, checkpoint_every = 25;
  int micro = 4; // for the profile's sizes; the planner picks the count
  uint16_t port = 27600;
  std::string csv = "fault_bench.csv", png = "fault_bench.png";
  // Padding compute to 3-4.5x keeps the four processes from fighting over
  // two cores, so the emulated devices, not the host, set the pace.
  std::vector<double> slowdowns{3, 3, 4.5, 4.5};
  std::string which = "planned";
  app.add_option("--model", model, "model (cnn, mlp, ...)");
  app.add_option("--steps", steps, "steps per run");
  app.add_option("--fault-step", fault_step,
                 "step at which a node of the plan is killed");
  app.add_option("--batch", batch, "mini-batch size");
  app.add_option("--checkpoint-every", checkpoint_every,
                 "restart baseline: checkpoint period in steps");
  app.add_option("--slowdown", slowdowns, "emulated slowdown of the 4 nodes")
    ->expected(4);
  app.add_option("--case", which,
                 "planned: the planner's plan, a replicated stage's member "
                 "killed; pipeline-single / pipeline-replicated: a 3-stage "
                 "cnn pipeline, its single-device last stage / a member of "
                 "its replicated middle stage killed")
    ->check(CLI::IsMember({"planned", "pipeline-single", "pipeline-replicated"}))
    ->capture_default_str();
  app.add_option("--base-port", port, "first of 25 ports used");
  app.add_option("--csv", csv, "per-step throughput of every run");
  app.add_option("--png", png, "throughput over time (gnuplot)");
  CLI11_PARSE(app, argc, argv);
  if (std::string(ASTEROID_CLI_PATH).empty()) {
    std::fprintf(stderr, "fault_bench: the asteroid program is not built\n");
    return 2;
  }
  data::dataset_options dopts;
  dopts.count = batch * steps;
  dopts.shape = {1, 28, 28};
  dopts.num_classes = 10;
  dopts.seed = 7;
  auto train = data::make_dataset("synthetic-images", dopts);

  actors::job_spec base;
  base.model = model;
  base.batch_size = batch;
  base.micro_batches = micro;
  base.optimizer.lr = 0.02;
  base.optimizer.momentum = 0.9;
  base.max_steps = steps;
  base.evaluate = false;
  base.progress = 0;
  base.planner = "asteroid"; // profile + planner for re-planning decisions
  // One profile for every run, so that re-planning and the fresh plan on
  // the survivors see the same numbers.
  {
    training::profiler_options po;
    po.batch_sizes = {1, std::max<int64_t>(1, batch / micro / 4), batch / micro, batch};
    torch::manual_seed(1);
    auto m = training::build_model(model, json::object());
    auto prof = training::profile_model(m, model, po);
    base.profile_path = "/tmp/asteroid-fault-bench-profile.json";
    planner::save_model_profile_file(prof, base.profile_path);
  }
  // The Asteroid plan for the four emulated devices, under the cluster
  // model the supervisor uses when links are not measured (speed = 1 /
  // slowdown, 1 Gbit/s): the same model re-planning and the fresh plan use.
  base.measure_links = false;
  std::vector<planner::device_spec> specs;
  for (size_t d = 0; d < slowdowns.size(); ++d)
    specs.push_back({"node" + std::to_string(d), "local", 1.0 / slowdowns[d],
                     int64_t{4} << 30, ""});
  auto profile = planner::load_model_profile_file(base.profile_path);
  planner::plan plan;
  int victim = -1;
  if (which == "planned") {
    plan = planner::make_planner("asteroid")->make_plan(
      profile, planner::cluster::uniform("bench", specs, 1e9), batch);
    // The victim: the last member of a replicated stage if there is one (the
    // common case), else the device of the last stage.
    for (auto& st : plan.stages)
      if (st.devices.size() > 1)
        victim = st.devices.back();
    if (victim < 0)
      victim = plan.stages.back().devices.back();
  } else {
    if (model != "cnn" || batch % 4 != 0) {
      std::fprintf(stderr, "fault_bench: --case %s is a plan of the cnn "
                           "(--model cnn) with a batch divisible by 4\n",
                   which.c_str());
      return 2;
    }
    // The cnn's layers: conv1, conv2, fc1, classifier. The middle pair
    // splits each micro-batch 5:3 (node1 computes 1.5x faster than node2).
    auto rows = batch / 4;
    plan.planner = "fault_bench " + which;
    plan.batch_size = batch;
    plan.micro_batches = 4;
    plan.stages = {{0, 1, {0}, {rows}},
                   {1, 2, {1, 2}, {rows * 5 / 8, rows - rows * 5 / 8}},
                   {2, 4, {3}, {rows}}};
    victim = which == "pipeline-single" ? 3 : 2;
  }
  base.plan = plan;
  base.micro_batches = plan.micro_batches;
  if (victim == 0 && plan.stages.size() == 1) {
    std::fprintf(stderr, "fault_bench: the plan uses one device; nothing to "
                         "recover\n");
    return 1;
  }
  actors::fault_spec kill;
  kill.node = victim;
  kill.step = fault_step;
  kill.delay_ms = 30;
  kill.action = "kill";

  std::vector<outcome> rows;
  // The last one is the paper's Figure-17 "w/o rescheduling" line.
  std::vector<std::string> modes{"replay", "replan", "restart",
                                 "replay_no_rebalance"};
  for (size_t i = 0; i < modes.size(); ++i) {
    auto job = base;
    job.fault_tolerance.recovery = modes[i];
    // Only the baseline checkpoints (every mode writes a job file's
    // checkpoint now): the others' numbers stay free of that cost.
    job.fault_tolerance.checkpoint_every = checkpoint_every;
    if (modes[i] == "restart")
      job.fault_tolerance.checkpoint_path = "/tmp/asteroid-fault-bench.ckpt";
    job.faults = {kill};
    std::fprintf(stderr, "fault_bench: %s ...\n", modes[i].c_str());
    outcome o;
    o.mode = modes[i];
    actors::job_result r;
    try {
      r = run(job, 4, static_cast<uint16_t>(port + 5 * i), slowdowns, train);
    } catch (const std::exception& e) {
      // One mode failing must not hide the others' numbers.
      std::fprintf(stderr, "fault_bench: %s failed: %s\n", modes[i].c_str(), e.what());
      o.mode += " (failed)";
      rows.push_back(o);
      continue;
    }
    if (auto* e = event(r, "detected"))
      o.detect_s = e->value("detect_s", -1.0);
    if (auto* e = event(r, "resumed"))
      o.resumed_s = e->value("since_fault_s", -1.0);
    if (auto* e = event(r, "caught_up"))
      o.caught_up_s = e->value("since_fault_s", -1.0);
    if (auto* e = event(r, "recovered")) {
      o.recover_s = (*e)["recover_s"].get<double>();
      o.rerun = (*e)["failed_step"].get<int64_t>() - (*e)["resume_step"].get<int64_t>() + 1;
      if ((*e)["mode"] != modes[i])
        o.mode += " -> " + (*e)["mode"].get<std::string>();
      o.kept = static_cast<int64_t>(e->value("kept", json::array()).size());
      planner::plan after = (*e)["plan"].get<planner::plan>();
      for (auto& st : after.stages)
        o.replicas += static_cast<int64_t>(st.devices.size());
    }
    // Steps recorded after the recovery: generation > 0, minus the first.
    std::vector<double> before, after;
    for (auto& it : r.iterations) {
      o.timeline.push_back(it["samples_per_s"].get<double>());
      o.at_s.push_back(it["t_s"].get<double>());
      (it["generation"].get<int>() > 0 ? after : before)
        .push_back(it["samples_per_s"].get<double>());
    }
    if (!after.empty())
      after.erase(after.begin());
    o.after_sps = median(after);
    o.before_sps = median(before);
    rows.push_back(o);
  }
  // Fresh plan on the three survivors, no fault.
  std::fprintf(stderr, "fault_bench: fresh plan on the survivors ...\n");
  auto fresh_job = base;
  fresh_job.plan.reset();
  std::vector<double> survivors;
  for (size_t d = 0; d < slowdowns.size(); ++d)
    if (static_cast<int>(d) != victim)
      survivors.push_back(slowdowns[d]);
  auto fresh = run(fresh_job, 3, static_cast<uint16_t>(port + 5 * modes.size()), survivors,
                   train);
  std::vector<double> fs;
  for (auto& it : fresh.iterations)
    fs.push_back(it["samples_per_s"].get<double>());
  if (!fs.empty())
    fs.erase(fs.begin());
  double fresh_sps = median(fs);

  nlohmann::json plan_json = plan;
  std::printf("\nRecovery benchmark (case %s): %s, batch %lld, %lld steps, node%d "
              "SIGKILLed at step %lld, restart baseline checkpoints every "
              "%lld steps; local processes on loopback, emulated slowdowns",
              which.c_str(), model.c_str(), static_cast<long long>(batch),
              static_cast<long long>(steps), victim,
              static_cast<long long>(fault_step),
              static_cast<long long>(checkpoint_every));
  for (auto s : slowdowns)
    std::printf(" %.2g", s);
  std::printf("\nplan: %s\n", plan_json["stages"].dump().c_str());
  std::printf("fresh plan on the 3 survivors (%d stages): %.1f samples/s "
              "(median step)\n\n",
              fresh.plan.num_stages(), fresh_sps);
  std::printf("| recovery | detect s | recovery s | kill -> first step s | "
              "kill -> interrupted step done s | steps re-run | replicas "
              "kept | samples/s before | after | after / fresh |\n"
              "|---|---|---|---|---|---|---|---|---|---|\n");
  for (auto& o : rows)
    std::printf("| %s | %.3f | %.3f | %.3f | %.3f | %lld | %lld of %lld | %.1f "
                "| %.1f | %.2f |\n",
                o.mode.c_str(), o.detect_s, o.recover_s, o.resumed_s,
                o.caught_up_s, static_cast<long long>(o.rerun),
                static_cast<long long>(o.kept), static_cast<long long>(o.replicas),
                o.before_sps, o.after_sps,
                fresh_sps > 0 ? o.after_sps / fresh_sps : 0.0);
  if (rows.size() >= 3 && rows[0].resumed_s > 0 && rows[0].caught_up_s > 0
      && rows[2].resumed_s > 0 && rows[2].caught_up_s > 0)
    std::printf("\nrestart-from-checkpoint / lightweight replay: kill -> first "
                "step %.1fx, kill -> interrupted step done %.1fx\n",
                rows[2].resumed_s / rows[0].resumed_s,
                rows[2].caught_up_s / rows[0].caught_up_s);
  std::ofstream out{csv};
  out << "mode,step,t_s,samples_per_s\n";
  for (auto& o : rows)
    for (size_t i = 0; i < o.timeline.size(); ++i)
      out << o.mode << "," << i + 1 << "," << o.at_s[i] << "," << o.timeline[i] << "\n";
  for (size_t i = 0; i < fresh.iterations.size(); ++i)
    out << "fresh," << i + 1 << "," << fresh.iterations[i]["t_s"].get<double>() << ","
        << fresh.iterations[i]["samples_per_s"].get<double>() << "\n";
  out.close();
  // Figure-17 style: throughput over time, one line per recovery mode.
  {
    std::ofstream gp{csv + ".gp"};
    gp << "set terminal pngcairo size 1000,500 noenhanced\nset output '" << png << "'\n"
       << "set datafile separator ','\nset key bottom right\n"
       << "set xlabel 'seconds since the job started'\nset ylabel 'samples/s (step)'\n"
       << "set title 'node" << victim << " SIGKILLed at step " << fault_step
       << " (fault_bench)'\nplot ";
    for (size_t i = 0; i < rows.size(); ++i)
      gp << (i ? ", " : "") << "'" << csv << "' using (strcol(1) eq '" << rows[i].mode
         << "' ? $3 : 1/0):4 with linespoints title '" << rows[i].mode << "'";
    gp << "\n";
  }
  if (std::system(("gnuplot '" + csv + ".gp' 2>&1").c_str()) == 0)
    std::printf("throughput over time: %s\n", png.c_str());
  else
    std::fprintf(stderr, "fault_bench: gnuplot failed or is missing; no PNG\n");
  std::printf("per-step throughput: %s\n", csv.c_str());
  return 0;
}
