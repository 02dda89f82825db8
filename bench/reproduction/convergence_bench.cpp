// Convergence (issue #6): test accuracy against emulated training time on
// Fashion-MNIST for on-device training, data parallelism and Asteroid's
// plan, on one emulated environment (emulated_env.hpp). Synchronous
// training makes the accuracy per step the same for every plan up to float
// rounding; what differs is how long a step takes. Each plan trains in
// chunks of K steps (a job each, continuing from the previous chunk's
// weights; momentum and the shuffle restart per chunk, the same for every
// plan); after each chunk the test set is evaluated (not timed). Prints a
// table, writes a CSV and a PNG (gnuplot).
#include "emulated_env.hpp"

#include "asteroid/actors/job.hpp"
#include "asteroid/data/make_dataset.hpp"
#include "asteroid/kernels/allocator.hpp"
#include "asteroid/planner/planner.hpp"
#include "asteroid/training/evaluate.hpp"
#include "asteroid/training/model_registry.hpp"
#include "asteroid/training/profiler.hpp"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <fstream>
#include <sstream>

using namespace asteroid;
using nlohmann::json;

namespace {

struct point {
  std::string plan;
  int64_t steps = 0;
  double emulated_s = 0; ///< training time so far (sum of step times / D)
  double accuracy = 0;
};

} // namespace

int main(int argc, char** argv) {
  kernels::keep_tensor_buffers_in_heap(); // as every asteroid process
  CLI::App app{"Asteroid convergence benchmark: Fashion-MNIST test accuracy vs emulated "
               "training time for on-device, DP and Asteroid plans"};
  std::string env_name = "env-d-100mbps", planners = "on-device,dp-even,asteroid",
              model = "cnn", data_dir, csv = "convergence.csv", png = "convergence.png";
  int64_t batch = 32, chunk = 25, steps = 150, train_limit = 12800, test_limit = 2000;
  double dilation = 0, cpu_budget = 1.5;
  uint16_t port = 27680;
  app.add_option("--env", env_name, "examples/clusters/NAME.json")->capture_default_str();
  app.add_option("--planners", planners, "Plans to compare")->capture_default_str();
  app.add_option("--model", model, "Zoo model")->capture_default_str();
  app.add_option("--data-dir", data_dir, "Fashion-MNIST folder (default: the Debian package's)");
  app.add_option("--batch", batch, "Mini-batch size")->capture_default_str();
  app.add_option("--chunk", chunk, "Steps between evaluations")->capture_default_str();
  app.add_option("--steps", steps, "Training steps per plan")->capture_default_str();
  app.add_option("--train-limit", train_limit, "Training samples used")->capture_default_str();
  app.add_option("--test-limit", test_limit, "Test samples evaluated")->capture_default_str();
  app.add_option("--dilation", dilation, "Time dilation D (0: automatic)")->capture_default_str();
  app.add_option("--cpu-budget", cpu_budget, "Cores for the devices (automatic D)")
    ->capture_default_str();
  app.add_option("--base-port", port, "First node port")->capture_default_str();
  app.add_option("--csv", csv, "CSV output")->capture_default_str();
  app.add_option("--png", png, "Plot output (gnuplot)")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (std::string(ASTEROID_CLI_PATH).empty()) {
    std::fprintf(stderr, "convergence_bench: the asteroid program is not built\n");
    return 2;
  }
  torch::set_num_threads(1);
  data::dataset_options dopts;
  dopts.path = data_dir;
  std::shared_ptr<data::dataset> train, test;
  try {
    train = data::make_dataset("fashion-mnist", dopts);
    dopts.split = data::split::test;
    test = data::make_dataset("fashion-mnist", dopts);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "convergence_bench: %s\n", e.what());
    return 2;
  }
  if (train_limit > 0 && train_limit < train->size()) {
    auto b = train->get_range(0, train_limit);
    train = std::make_shared<data::tensor_dataset>(b.inputs, b.targets, train->num_classes(),
                                                   train->name());
  }
  auto env = bench::emulate(env_name, dilation, cpu_budget, port);
  const double D = env.dilation;
  std::fprintf(stderr, "%s: %zu devices, dilation %.2f (links paced to %.1f Mbit/s)\n",
               env_name.c_str(), env.cluster.devices.size(), D,
               env.nodes.link_rates_mbps.at(0));
  training::profiler_options po;
  po.batch_sizes = {1, 2, 4, 8, 16, 32};
  po.device = "local";
  torch::manual_seed(1);
  auto profiled = training::build_model(model, json::object());
  auto profile = training::profile_model(profiled, model, po);
  actors::local_cluster cluster{env.nodes};
  caf::actor_system_config cfg;
  actors::configure(cfg);
  caf::actor_system sys{cfg};
  auto devices = actors::connect_all(sys, cluster.endpoints(), std::chrono::seconds(5));
  std::vector<point> points;
  for (auto& name : bench::split_list(planners)) {
    auto plan = planner::make_planner(name)->make_plan(profile, env.cluster, batch);
    torch::manual_seed(1);
    auto m = training::build_model(model, json::object());
    points.push_back({name, 0, 0, training::evaluate(m, *test, 500, test_limit).accuracy});
    double t = 0;
    for (int64_t done = 0; done < steps; done += chunk) {
      auto job = bench::emulated_job(model, plan, cluster.endpoints());
      job.optimizer.lr = 0.02;
      job.max_steps = std::min(chunk, steps - done);
      job.seed = static_cast<uint64_t>(done / chunk + 1); // a new shuffle per chunk
      auto r = actors::run_job(sys, job, devices, m, train, nullptr);
      m = r.model;
      for (auto& it : r.iterations)
        t += it["seconds"].get<double>() / D;
      auto acc = training::evaluate(m, *test, 500, test_limit).accuracy;
      points.push_back({name, done + job.max_steps, t, acc});
      std::fprintf(stderr, "  %-10s step %4lld: %7.1f s emulated, test accuracy %.2f %%\n",
                   name.c_str(), static_cast<long long>(done + job.max_steps), t, acc * 100);
    }
  }
  // -- report --
  std::ofstream out{csv};
  out << "plan,steps,emulated_s,test_accuracy\n";
  for (auto& p : points)
    out << p.plan << "," << p.steps << "," << p.emulated_s << "," << p.accuracy << "\n";
  out.close();
  // Time to reach the accuracy every plan reaches (the lowest final accuracy).
  double target = 1;
  for (auto& name : bench::split_list(planners))
    for (auto it = points.rbegin(); it != points.rend(); ++it)
      if (it->plan == name) {
        target = std::min(target, it->accuracy);
        break;
      }
  std::printf("\nFashion-MNIST, %s, batch %lld, %lld steps, %s emulated (D = %.2f); test accuracy "
              "on %lld samples after every %lld steps\n\n| plan | emulated s to %.1f %% | final "
              "accuracy %% | emulated s, all steps |\n|---|---|---|---|\n",
              model.c_str(), static_cast<long long>(batch), static_cast<long long>(steps),
              env_name.c_str(), D, static_cast<long long>(test_limit),
              static_cast<long long>(chunk), target * 100);
  for (auto& name : bench::split_list(planners)) {
    double reach = -1, final_acc = 0, total = 0;
    for (auto& p : points)
      if (p.plan == name) {
        if (reach < 0 && p.accuracy >= target)
          reach = p.emulated_s;
        final_acc = p.accuracy;
        total = p.emulated_s;
      }
    std::printf("| %s | %.1f | %.2f | %.1f |\n", name.c_str(), reach, final_acc * 100, total);
  }
  std::printf("wrote %s\n", csv.c_str());
  std::ofstream gp{csv + ".gp"};
  gp << "set terminal pngcairo size 900,500 noenhanced\nset output '" << png << "'\n"
     << "set datafile separator ','\nset key bottom right\n"
     << "set xlabel 'training time, emulated seconds'\nset ylabel 'test accuracy'\n"
     << "set title 'Fashion-MNIST, " << model << ", " << env_name << " (convergence_bench)'\n"
     << "plot ";
  auto names = bench::split_list(planners);
  for (size_t i = 0; i < names.size(); ++i)
    gp << (i ? ", " : "") << "'" << csv << "' using (strcol(1) eq '" << names[i]
       << "' ? $3 : 1/0):4 with linespoints title '" << names[i] << "'";
  gp << "\n";
  gp.close();
  if (std::system(("gnuplot '" + csv + ".gp' 2>&1").c_str()) == 0)
    std::printf("wrote %s\n", png.c_str());
  else
    std::fprintf(stderr, "convergence_bench: gnuplot failed or is missing; no PNG\n");
  return 0;
}
