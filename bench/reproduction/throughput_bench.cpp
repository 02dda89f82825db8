// Throughput, Table-4 style (issue #6): for each environment (A-D), link
// rate and model, the plans of on-device training, data parallelism,
// pipeline parallelism, PipeDream and Asteroid run one after another on the
// same emulated cluster (local node processes; slowed compute and paced
// links under one time-dilation factor), and the measured samples/s stand
// next to the planner's prediction. Prints a table, writes a CSV and, when
// gnuplot is there, a PNG.
#include "emulated_env.hpp"
#include "../median.hpp"

#include "asteroid/actors/job.hpp"
#include "asteroid/actors/node.hpp"
#include "asteroid/data/make_dataset.hpp"
#include "asteroid/kernels/allocator.hpp"
#include "asteroid/models/model_options.hpp"
#include "asteroid/planner/cost_model.hpp"
#include "asteroid/planner/device_catalog.hpp"
#include "asteroid/planner/error.hpp"
#include "asteroid/planner/json_io.hpp"
#include "asteroid/planner/planner.hpp"
#include "asteroid/training/model_registry.hpp"
#include "asteroid/training/profiler.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include <stdlib.h> // mkdtemp

using namespace asteroid;
using nlohmann::json;

namespace {

using bench::split_list;

using bench::median;

struct row {
  std::string env, model, planner;
  int mbps = 0;
  double dilation = 1;
  double co_location = 1; ///< the cluster's co_location_slowdown the planners saw
  int stages = 0, micro_batches = 0, devices = 0;
  /// samples/s in emulated time; measured = best run. `simulated` is the
  /// plan's prediction (its 1F1B schedule simulated, boundaries priced as
  /// the runtime sends them: `plan::simulated_samples_per_s`), `predicted`
  /// the closed form the planners rank by (`plan::predicted_samples_per_s`).
  double predicted = 0, simulated = 0, measured = 0;
  std::vector<double> runs;           ///< every run's samples/s, in order
  std::string error;                  ///< infeasible / failed run
  planner::plan plan;
  json layout;         ///< the plan without its planner's name and prediction
  std::string same_as; ///< an earlier planner whose plan is identical
};

std::string join(const std::vector<double>& v, const char* sep) {
  std::string s;
  char cell[32];
  for (auto x : v) {
    std::snprintf(cell, sizeof cell, "%.2f", x);
    s += (s.empty() ? "" : sep) + std::string(cell);
  }
  return s;
}

/// What a run executes: stages, devices, shares, micro-batches. On uniform
/// links, devices of one speed and budget are interchangeable (identical
/// emulated nodes): each is named by its class and the order in which the
/// plan first uses a device of that class, so that the same plan on another
/// of three identical Jetson NX counts as the same plan.
json layout_of(const planner::plan& p, const planner::cluster& c) {
  json j = p;
  j.erase("planner");
  j.erase("predicted");
  if (!c.uniform_links())
    return j;
  std::map<int, std::string> name;
  std::map<std::pair<double, int64_t>, int> used_of_class;
  for (auto& st : j["stages"])
    for (auto& d : st["devices"]) {
      const int device = d.get<int>();
      auto it = name.find(device);
      if (it == name.end()) {
        const auto& spec = c.devices.at(static_cast<size_t>(device));
        const int k = used_of_class[{spec.speed, spec.memory_bytes}]++;
        it = name.emplace(device, std::to_string(spec.speed) + "/"
                                    + std::to_string(spec.memory_bytes) + "#"
                                    + std::to_string(k)).first;
      }
      d = it->second;
    }
  return j;
}

/// Tokens per sample of the models that take token ids (BERT), from
/// --seq-len; set once in main before any model is built.
int64_t sequence_length = 512;

/// True when `model` takes token ids (BERT) rather than images.
bool takes_tokens(const std::string& model) {
  static std::map<std::string, bool> known;
  if (auto it = known.find(model); it != known.end())
    return it->second;
  // Only the first layer constructed: the input's type needs no more.
  auto m = training::build_model(model, json::object(), models::layer_range{0, 1});
  return known[model] = m->input_dtype() == torch::kLong;
}

/// The model's options: the input of the catalog's times per sample where it
/// has them (the paper's datasets: CIFAR-10 for MobileNetV2 and
/// EfficientNet-B1, Mini-ImageNet at 3x224x224 with 100 classes for
/// ResNet-50), since absolute speeds compare this machine with those times;
/// CIFAR-10's for any other image model; `sequence_length` token ids and
/// 10 classes for a model that takes tokens.
json model_options_of(const std::string& model) {
  if (takes_tokens(model))
    return {{"num_classes", 10}, {"seq_len", sequence_length}};
  json o = {{"num_classes", 10}, {"in_channels", 3}, {"image_size", 32}};
  if (auto text = planner::catalog_model_options(model); !text.empty())
    o.update(json::parse(text));
  return o;
}

/// Synthetic samples of `count` in the model's input: images of its
/// options' size, or token ids of its vocabulary (the model's default).
std::shared_ptr<data::dataset> synthetic_data(const std::string& model, int64_t count) {
  const auto o = model_options_of(model);
  data::dataset_options d;
  d.count = count;
  d.num_classes = o.at("num_classes").get<int64_t>();
  d.seed = 7;
  if (takes_tokens(model)) {
    d.length = o.at("seq_len").get<int64_t>();
    d.vocab = models::model_options{}.vocab_size();
    return data::make_dataset("synthetic-tokens", d);
  }
  const auto side = o.at("image_size").get<int64_t>();
  d.shape = {o.at("in_channels").get<int64_t>(), side, side};
  return data::make_dataset("synthetic-images", d);
}

planner::model_profile profile(const std::string& model, int64_t batch) {
  training::profiler_options po;
  po.batch_sizes.clear();
  for (int64_t b = 1; b <= batch; b *= 2)
    po.batch_sizes.push_back(b);
  po.warmup = 2;
  po.repeats = 5;
  po.device = "local";
  torch::manual_seed(1);
  auto m = training::build_model(model, model_options_of(model));
  return training::profile_model(m, model, po);
}

/// How the jobs of a row run, besides their plans.
struct run_settings {
  /// Non-empty: the devices compute every pass in their slowdown times this
  /// profile's time (job_spec::compute_time "profile").
  std::string profile_path;
  /// job_spec::run_ahead: a step starts while the last one drains.
  bool run_ahead = true;
};

/// The step timeout of a run of `plan` at dilation D: five times its
/// predicted step (the slower of its two predictions) on the wall clock, and
/// never below the job's default. At the dilations absolute speeds need
/// (129 for ResNet-50 on B) a slow plan's step outlasts the default: PP's,
/// 2.1 s emulated, failed there after 120 s.
int64_t step_timeout_ms(const planner::plan& plan, double dilation) {
  const int64_t fallback = actors::job_spec{}.step_timeout_ms;
  double sps = 0;
  for (double p : {plan.predicted_samples_per_s, plan.simulated_samples_per_s})
    if (p > 0)
      sps = sps > 0 ? std::min(sps, p) : p;
  if (sps <= 0)
    return fallback;
  const double step_ms = 1e3 * static_cast<double>(plan.batch_size) / sps * dilation;
  return std::max(fallback, static_cast<int64_t>(std::ceil(5 * step_ms)));
}

/// Runs `plan` on the cluster at dilation D; the iteration records of the
/// timed steps.
std::vector<json> run_plan(const actors::local_cluster& cluster, const std::string& model,
                           const planner::plan& plan, std::shared_ptr<data::dataset> train,
                           int64_t warmup, int64_t steps, double dilation,
                           const std::string& trace_path, const run_settings& how) {
  auto job = bench::emulated_job(model, plan, cluster.endpoints());
  job.step_timeout_ms = step_timeout_ms(plan, dilation);
  if (!how.profile_path.empty()) {
    job.profile_path = how.profile_path;
    job.compute_time = "profile";
  }
  job.run_ahead = how.run_ahead;
  job.trace_path = trace_path;
  job.trace_steps = warmup + steps;
  job.model_options = model_options_of(model);
  job.optimizer.lr = 0.01;
  job.max_steps = warmup + steps;
  job.seed = 1;
  caf::actor_system_config cfg;
  actors::configure(cfg);
  caf::actor_system sys{cfg};
  auto devices = actors::connect_all(sys, job.nodes, std::chrono::seconds(5));
  torch::manual_seed(1);
  auto m = training::build_model(model, model_options_of(model));
  auto r = actors::run_job(sys, job, devices, m, train, nullptr);
  const auto skip = std::min(r.iterations.size(), static_cast<size_t>(warmup));
  return {r.iterations.begin() + static_cast<std::ptrdiff_t>(skip), r.iterations.end()};
}

/// Median samples/s of `plan`'s timed steps, in emulated time (wall / dilation).
/// Says so when the host could not keep up with the emulated devices
/// (overrun: compute the padding could not absorb).
double measure(const actors::local_cluster& cluster, const std::string& model,
               const planner::plan& plan, std::shared_ptr<data::dataset> train,
               int64_t warmup, int64_t steps, double dilation,
               const std::string& trace_path, const run_settings& how) {
  std::vector<double> sps;
  double busy = 0, overrun = 0;
  for (auto& it : run_plan(cluster, model, plan, train, warmup, steps, dilation, trace_path,
                            how)) {
    sps.push_back(plan.batch_size * dilation / it["seconds"].get<double>());
    for (auto& rep : it["replicas"]) {
      busy += rep.value("busy_s", 0.0);
      overrun += rep.value("overrun_s", 0.0);
    }
  }
  if (busy > 0 && overrun > 0.01 * busy)
    std::fprintf(stderr, "    overrun: the host took %.1f %% longer than the emulated devices' "
                         "compute (%.2f of %.2f s)\n",
                 100 * overrun / busy, overrun, busy);
  return median(sps);
}

/// How much slower than the cost model predicts `plan`'s devices compute on
/// the emulated cluster, per timed step: their emulated busy time over the
/// predicted compute of the same step (forward and backward of every
/// micro-batch; what else a replica computes, the optimizer step above all,
/// is not predicted and counts as slowness in both pilots).
std::vector<double> compute_vs_prediction(const actors::local_cluster& cluster,
                                          const std::string& model, const planner::plan& plan,
                                          std::shared_ptr<data::dataset> train,
                                          const planner::model_profile& prof,
                                          const planner::cluster& c, double dilation) {
  double predicted = 0;
  for (const auto& st : planner::make_steps(plan, prof, c).steps)
    for (size_t i = 0; i < st.device_forward_s.size(); ++i)
      predicted += plan.micro_batches * (st.device_forward_s[i] + st.device_backward_s[i]);
  std::vector<double> ratios;
  for (auto& it : run_plan(cluster, model, plan, train, 1, 3, dilation, "", run_settings{})) {
    double busy = 0;
    for (auto& rep : it["replicas"])
      busy += rep["busy_s"].get<double>();
    ratios.push_back(busy / dilation / predicted);
  }
  return ratios;
}

void write_plot(const std::string& csv, const std::string& png,
                const std::vector<std::string>& planners) {
  // One cluster of bars per (environment, link, model), one bar per plan.
  std::string script = png + ".gp";
  std::ofstream gp{script};
  gp << "set terminal pngcairo size 1400,600 noenhanced\nset output '" << png << "'\n"
     << "set datafile separator ','\nset style data histograms\n"
     << "set style histogram clustered gap 1\nset style fill solid 0.8 border -1\n"
     << "set ylabel 'samples/s (emulated time)'\nset xtics rotate by -35\n"
     << "set key outside right\nset title 'Measured throughput per plan (throughput_bench)'\n"
     << "plot ";
  for (size_t i = 0; i < planners.size(); ++i)
    gp << (i ? ", " : "") << "'" << csv << ".wide' using " << i + 2
       << (i ? "" : ":xtic(1)") << " title '" << planners[i] << "'";
  gp << "\n";
  gp.close();
  auto cmd = "gnuplot '" + script + "' 2>&1";
  if (std::system(cmd.c_str()) != 0)
    std::fprintf(stderr, "throughput_bench: gnuplot failed or is missing; no PNG\n");
  else
    std::printf("wrote %s\n", png.c_str());
}

/// Asteroid's speedup over on-device training (the most powerful device),
/// data parallelism and pipeline parallelism in the paper's Table 4 (0: not
/// reported or unreadable in the source). Environments A and B only; the
/// paper does not tabulate C and D.
struct paper_speedups {
  double on_device = 0, dp = 0, pp = 0;
};

std::optional<paper_speedups> paper_table4(const std::string& env, int mbps,
                                           const std::string& model) {
  std::string m;
  for (char ch : model)
    if (ch != '-' && ch != '_')
      m += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  struct cell {
    const char* env;
    int mbps;
    const char* model;
    paper_speedups s;
  };
  static const cell table[] = {
    {"a", 100, "efficientnetb1", {4.4, 2.1, 2.8}},  {"b", 100, "efficientnetb1", {3.0, 4.8, 9.7}},
    {"b", 1000, "efficientnetb1", {3.7, 2.1, 1.4}}, {"a", 100, "mobilenetv2", {4.5, 1.5, 3.5}},
    {"b", 100, "mobilenetv2", {3.2, 2.3, 11.2}},    {"b", 1000, "mobilenetv2", {3.8, 1.2, 1.3}},
    {"a", 100, "resnet50", {3.4, 3.6, 5.8}},        {"b", 100, "resnet50", {1.5, 6.1, 12.2}},
    {"b", 1000, "resnet50", {3.7, 2.9, 3.1}},       {"a", 100, "bertsmall", {3.5, 6.4, 0}},
    {"b", 100, "bertsmall", {1.3, 6.8, 0}},         {"b", 1000, "bertsmall", {3.9, 4.2, 1.3}}};
  for (const auto& c : table)
    if (env == c.env && mbps == c.mbps && m == c.model)
      return c.s;
  return std::nullopt;
}

/// "B / M" of the Asteroid plan among a row's `n` plans starting at `first`
/// (batch size / micro-batch count), or "-" when it did not run.
std::string batch_and_micro_batches(const std::vector<row>& rows, size_t first, size_t n,
                                    int64_t batch) {
  for (size_t k = first; k < first + n && k < rows.size(); ++k)
    if (rows[k].planner == "asteroid" && rows[k].micro_batches > 0)
      return std::to_string(batch) + " / " + std::to_string(rows[k].micro_batches);
  return "-";
}

} // namespace

int main(int argc, char** argv) {
  kernels::keep_tensor_buffers_in_heap(); // as every asteroid process
  CLI::App app{"Asteroid throughput benchmark (Table-4 style): measured vs "
               "predicted samples/s of every plan on emulated environments"};
  std::string envs = "a,b,c,d", rates = "100,1000",
              models = "mobilenet_v2,efficientnet_b1",
              planners = "on-device,dp-even,pp,pipedream,asteroid",
              csv = "throughput.csv", png = "throughput.png", trace_dir,
              speeds = "relative", compute_time = "auto";
  int64_t batch = 32, warmup = 2, steps = 3;
  int repeats = 2;
  bool no_run_ahead = false, half_duplex = false;
  // One core for the devices' compute (the padding sleeps, so only the compute
  // itself takes cores; the testbed gives it 1.5) leaves the other to the nodes'
  // data planes, CAF and the supervisor: at 1.5 their threads competed with that
  // compute for the cores, every boundary of a pipeline of many small
  // micro-batches waited for them, and such plans ran up to 17 % below their
  // simulated schedules (run 34; docs/benchmarks.md, "Time dilation").
  double dilation = 0, cpu_budget = 1.0, contender = 0.5, co_location = 0;
  uint16_t port = 27670;
  app.add_option("--envs", envs, "Environments (examples/clusters/env-X-*.json)")
    ->capture_default_str();
  app.add_option("--mbps", rates, "Link rates")->capture_default_str();
  app.add_option("--models", models,
                 "Zoo models, on the paper's inputs where the catalog has its times "
                 "(ResNet-50: 3x224x224, 100 classes), else CIFAR-10's (3x32x32) for an image "
                 "model and --seq-len token ids for one that takes tokens (BERT)")
    ->capture_default_str();
  app.add_option("--seq-len", sequence_length,
                 "Token ids per sample of a model that takes tokens (the paper's BERT-small "
                 "input reads 32x512; 512 tokens as the analytic profile takes it)")
    ->capture_default_str()
    ->check(CLI::Range(1, 512));
  app.add_option("--planners", planners, "Plans to run; speedups are Asteroid's over each")
    ->capture_default_str();
  app.add_option("--batch", batch, "Mini-batch size")->capture_default_str();
  app.add_option("--warmup", warmup, "Untimed steps per run")->capture_default_str();
  app.add_option("--steps", steps, "Timed steps per run (median kept)")->capture_default_str();
  app.add_option("--repeats", repeats,
                 "Runs of each contender, in rounds over the environment (fastest kept)")
    ->capture_default_str()
    ->check(CLI::Range(1, 10));
  app.add_option("--contender", contender,
                 "Plans predicted at least this fraction of their row's best are "
                 "contenders (run --repeats times; the others once)")
    ->capture_default_str()
    ->check(CLI::Range(0.0, 1.0));
  app.add_option("--speeds", speeds,
                 "Device speeds: relative (the fastest device runs at this machine's "
                 "speed) or absolute (each device's time per sample from the cluster file "
                 "or the catalog, the paper's epoch times, against this machine's)")
    ->check(CLI::IsMember({"relative", "absolute"}))
    ->capture_default_str();
  app.add_option("--compute-time", compute_time,
                 "How long an emulated device computes a pass: measured (its slowdown "
                 "times this machine's time, whose speed moves), profile (its slowdown "
                 "times the profile's time: every run computes alike) or auto (profile "
                 "with absolute speeds, measured with relative ones)")
    ->check(CLI::IsMember({"auto", "measured", "profile"}))
    ->capture_default_str();
  app.add_flag("--no-run-ahead", no_run_ahead,
               "Every step waits for the last one to finish on every replica "
               "(job_spec::run_ahead false)");
  app.add_flag("--half-duplex", half_duplex,
               "The planners price each link as half duplex (cluster::full_duplex_links "
               "false, as every run before 4807be6 did, runs 1-18); by default full duplex, as the "
               "emulation paces each direction on a connection of its own (the plans' "
               "simulated schedules follow the same choice)");
  app.add_option("--dilation", dilation, "Time dilation D (0: chosen per environment)")
    ->capture_default_str();
  app.add_option("--cpu-budget", cpu_budget,
                 "Cores the emulated devices may use at once (automatic D)")
    ->capture_default_str();
  app.add_option("--co-location", co_location,
                 "The clusters' co_location_slowdown (0: measured per environment and "
                 "model by two pilot runs; 1: none)")
    ->capture_default_str()
    ->check(CLI::Number & (CLI::IsMember({0.0}) | CLI::Range(1.0, 100.0)));
  app.add_option("--base-port", port, "First node port (one per device)")->capture_default_str();
  app.add_option("--csv", csv, "CSV output")->capture_default_str();
  app.add_option("--png", png, "Plot output (gnuplot)")->capture_default_str();
  app.add_option("--trace-dir", trace_dir,
                 "Write a Chrome trace of every timed run here (wall time, not dilated)");
  CLI11_PARSE(app, argc, argv);
  if (std::string(ASTEROID_CLI_PATH).empty()) {
    std::fprintf(stderr, "throughput_bench: the asteroid program is not built\n");
    return 2;
  }
  if (!trace_dir.empty())
    std::filesystem::create_directories(trace_dir);
  const bool run_ahead = !no_run_ahead;
  if (compute_time == "auto")
    compute_time = speeds == "absolute" ? "profile" : "measured";
  std::fprintf(stderr, "compute time of the emulated devices: %s\n", compute_time.c_str());
  torch::set_num_threads(1); // profiles as the nodes compute (--threads 1)
  auto t_start = std::chrono::steady_clock::now();
  auto plan_names = split_list(planners);
  for (auto& p : plan_names) // a misspelt name fails here, not as an "infeasible" column
    try {
      planner::make_planner(p);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "throughput_bench: --planners: %s\n", e.what());
      return 2;
    }
  // The benchmark feeds synthetic images or token ids: a model that takes
  // anything else or a misspelt name is refused here, not deep in a job.
  for (auto& m : split_list(models))
    try {
      // takes_tokens builds the first layer (and refuses a misspelt name);
      // token models need no second build (BERT's first layer is its
      // 30522-word embedding).
      if (takes_tokens(m))
        continue;
      auto built = training::build_model(m, model_options_of(m), models::layer_range{0, 1});
      if (built->input_shape().size() != 3)
        throw std::invalid_argument(m + " takes neither images (channels x height x width) "
                                        "nor token ids; the benchmark feeds only those");
    } catch (const std::exception& e) {
      std::fprintf(stderr, "throughput_bench: --models: %s\n", e.what());
      return 2;
    }
  // Every environment's cluster file, and with absolute speeds every
  // device's time per sample of every model, before anything runs: a
  // misspelt environment or a model without times (the catalog has none
  // for BERT-small) is refused naming it, not after minutes of profiling.
  for (auto& env : split_list(envs))
    for (auto& rate : split_list(rates))
      try {
        auto file = planner::load_cluster_file(std::string(ASTEROID_SOURCE_DIR) +
                                               "/examples/clusters/env-" + env + "-" + rate +
                                               "mbps.json");
        if (speeds == "absolute")
          for (auto& m : split_list(models))
            planner::absolute_speeds(file, m, 1.0);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "throughput_bench: --envs %s --mbps %s: %s\n", env.c_str(),
                     rate.c_str(), e.what());
        return 2;
      }
  // The profiles the plans were made with, for the nodes to compute by.
  std::filesystem::path profile_dir;
  if (compute_time == "profile") {
    std::string tmpl = (std::filesystem::temp_directory_path() / "throughput-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) {
      std::perror("throughput_bench: mkdtemp");
      return 1;
    }
    profile_dir = tmpl;
  }
  std::map<std::string, std::shared_ptr<data::dataset>> data;
  for (auto& m : split_list(models))
    data[m] = synthetic_data(m, batch * (warmup + steps));
  // Relative speeds: one set of nodes per environment serves every model.
  // Absolute speeds depend on the model (this machine's time per sample
  // against the device's), so each model gets nodes of its own.
  std::vector<std::vector<std::string>> model_groups;
  if (speeds == "absolute")
    for (auto& m : data)
      model_groups.push_back({m.first});
  else
    model_groups.push_back(split_list(models));
  std::vector<row> rows;
  for (auto& env : split_list(envs))
    for (auto& rate : split_list(rates))
      for (auto& group : model_groups) {
      auto name = "env-" + env + "-" + rate + "mbps";
      std::map<std::string, std::shared_ptr<data::dataset>> group_data;
      for (auto& m : group)
        group_data[m] = data.at(m);
      // Profiled again for every environment, with its nodes started
      // (absolute speeds: just before, as they set the nodes' slowdowns):
      // the host's speed drifts over a run of many minutes (one early
      // profile was 15 % faster than every on-device run after it), and the
      // planner's inputs should be measured in the conditions its plans run
      // in, as Asteroid profiles at the start of each job.
      std::map<std::string, planner::model_profile> profiles;
      std::map<std::string, std::string> profile_files; ///< compute time "profile"
      auto profile_all = [&]() {
        for (auto& m : group_data) {
          auto& prof = profiles.emplace(m.first, profile(m.first, batch)).first->second;
          if (!profile_dir.empty()) {
            auto file = (profile_dir / (name + "-" + m.first + ".json")).string();
            planner::save_model_profile_file(prof, file);
            profile_files[m.first] = file;
          }
          double step_s = 0;
          for (auto& l : prof.layers)
            step_s += l.forward_s.back() + l.backward_s.back();
          std::fprintf(stderr, "  profiled %s: forward + backward %.1f ms at batch %lld\n",
                       m.first.c_str(), step_s * 1e3, static_cast<long long>(batch));
        }
      };
      bench::emulated_env env_nodes;
      if (speeds == "absolute") {
        profile_all();
        const auto& [model, prof] = *profiles.begin();
        double step_s = 0; // forward + backward of one batch (profiled up to it)
        for (auto& l : prof.layers)
          step_s += l.forward_time(static_cast<double>(batch)) +
                    l.backward_time(static_cast<double>(batch));
        auto file = planner::load_cluster_file(std::string(ASTEROID_SOURCE_DIR) +
                                               "/examples/clusters/" + name + ".json");
        env_nodes = bench::emulate(planner::absolute_speeds(file, model, step_s / batch), name,
                                   dilation, cpu_budget, port, true);
        std::fprintf(stderr, "%s / %s: this machine %.2f ms per sample; device speeds "
                             "relative to it:",
                     name.c_str(), model.c_str(), 1e3 * step_s / batch);
        for (auto& d : env_nodes.cluster.devices)
          std::fprintf(stderr, " %s %.3f", d.name.c_str(), d.speed);
        std::fprintf(stderr, "\n");
      } else {
        env_nodes = bench::emulate(name, dilation, cpu_budget, port);
      }
      env_nodes.cluster.full_duplex_links = !half_duplex;
      const auto& c = env_nodes.cluster;
      const double D = env_nodes.dilation;
      const auto& o = env_nodes.nodes;
      std::fprintf(stderr, "%s: %zu devices, dilation %.2f (links paced to %.1f Mbit/s)\n",
                   name.c_str(), c.devices.size(), D, o.link_rates_mbps.at(0));
      actors::local_cluster cluster{o};
      if (profiles.empty())
        profile_all();
      // Fresh node processes run their first jobs slower (heap growth, lazy
      // initialisation: the same plan measured 62-74 samples/s first and
      // 87-88 later). One untimed run of data parallelism over every device
      // warms them all up.
      for (auto& [model, prof] : profiles) {
        try {
          auto plan = planner::make_planner("dp-proportional")->make_plan(prof, c, batch);
          measure(cluster, model, plan, group_data[model], 2, 0, D, "",
                  run_settings{profile_files[model], run_ahead});
        } catch (const std::exception& e) {
          std::fprintf(stderr, "  warm-up run failed: %s\n", e.what());
          cluster.keep_logs();
        }
      }
      // Emulated devices share this machine's cores, caches and memory
      // bandwidth: with several of them computing, each computes slower than
      // the profile (measured alone) says, and one device alone does not.
      // Pilot runs measure it for this environment and model, in the
      // conditions the plans run in: the plan Asteroid picks without the
      // factor (when it uses more than one device) and the best one-device
      // plan, each compute against its prediction. Their ratio is the
      // cluster's co_location_slowdown, which every planner of the row then
      // sees.
      std::map<std::string, planner::cluster> clusters;
      for (auto& [model, prof] : profiles) {
        auto& cm = clusters.emplace(model, c).first->second;
        if (co_location >= 1) {
          cm.co_location_slowdown = co_location;
          continue;
        }
        if (compute_time == "profile") {
          // A device's time then comes from the profile, however many
          // devices share the host (past what padding absorbs, the
          // replicas report overrun): nothing for a pilot to measure.
          std::fprintf(stderr, "  %s: compute time from the profile, co-location slowdown 1\n",
                       model.c_str());
          continue;
        }
        try {
          auto ours = planner::make_planner("asteroid")->make_plan(prof, c, batch);
          if (ours.num_devices() == 1) {
            std::fprintf(stderr, "  %s: Asteroid plans one device, no co-location pilot\n",
                         model.c_str());
            continue;
          }
          // Each pilot twice, alternating, and the median of its steps kept:
          // one pilot each was at the mercy of one slow stretch of the host
          // (an on-device pilot at 1.30x its prediction, others at
          // 0.99-1.12x); the fastest step instead missed what co-location
          // costs most steps (C/EfficientNet-B1: 1.07 by the fastest step,
          // its 3-stage plan then measured 0.98x on-device).
          auto alone = planner::make_planner("on-device")->make_plan(prof, c, batch);
          std::vector<double> shared_steps, solo_steps;
          for (int round = 0; round < 2; ++round) {
            for (double x : compute_vs_prediction(cluster, model, ours, group_data[model], prof, c, D))
              shared_steps.push_back(x);
            for (double x : compute_vs_prediction(cluster, model, alone, group_data[model], prof, c, D))
              solo_steps.push_back(x);
          }
          const double shared = median(shared_steps), solo = median(solo_steps);
          cm.co_location_slowdown = std::max(1.0, shared / solo);
          std::fprintf(stderr,
                       "  %s: compute %.2fx its prediction in a %d-stage pilot, %.2fx on one "
                       "device: co-location slowdown %.2f\n",
                       model.c_str(), shared, ours.num_stages(), solo,
                       cm.co_location_slowdown);
        } catch (const std::exception& e) {
          std::fprintf(stderr, "  %s: co-location pilot failed (%s); slowdown 1\n",
                       model.c_str(), e.what());
          cluster.keep_logs();
        }
      }
      // Round 1 runs every plan; later rounds run again the contenders, the
      // plans predicted at least --contender of their row's best prediction
      // (chosen by prediction, so a slow first run cannot decide it), after
      // every other run of the environment. A plan's figure is its fastest
      // run: host noise on a shared machine only ever slows a run down (one
      // run measured 42 % below its prediction and 15 % below its repeat).
      const size_t env_first = rows.size();
      auto run = [&](row& r, int round) {
        const auto name_of_run = name + "-" + r.model + "-" + r.planner
                                 + (round > 1 ? "-" + std::to_string(round) : "");
        try {
          r.runs.push_back(measure(cluster, r.model, r.plan, group_data[r.model], warmup, steps, D,
                                   trace_dir.empty() ? "" : trace_dir + "/" + name_of_run
                                                              + ".json",
                                   run_settings{profile_files[r.model], run_ahead}));
        } catch (const std::exception& e) {
          r.error = std::string("failed: ") + e.what();
          cluster.keep_logs();
        }
        std::fprintf(stderr,
                     "  %-15s %-10s %-16s predicted %8.2f simulated %8.2f measured %8.2f%s %s\n",
                     r.model.c_str(), r.planner.c_str(), name.c_str(), r.predicted, r.simulated,
                     r.runs.empty() ? 0.0 : r.runs.back(),
                     round > 1 ? (" (round " + std::to_string(round) + ")").c_str() : "",
                     r.error.c_str());
      };
      for (auto& [model, prof] : profiles)
        for (auto& p : plan_names) {
          const auto& cm = clusters.at(model);
          row r{env, model, p, std::stoi(rate), D, cm.co_location_slowdown};
          r.devices = static_cast<int>(c.devices.size());
          try {
            r.plan = planner::make_planner(p)->make_plan(prof, cm, batch);
          } catch (const std::exception& e) {
            // No plan: infeasible in this cluster's memory, or the planner failed.
            const bool infeasible = dynamic_cast<const planner::planner_error*>(&e) != nullptr;
            r.error = infeasible ? "infeasible" : std::string("failed: ") + e.what();
            std::fprintf(stderr, "  %-15s %-10s %-16s %s\n", model.c_str(), p.c_str(),
                         name.c_str(), r.error.c_str());
            rows.push_back(r);
            continue;
          }
          r.stages = r.plan.num_stages();
          r.micro_batches = r.plan.micro_batches;
          r.predicted = r.plan.predicted_samples_per_s;
          r.simulated = r.plan.simulated_samples_per_s;
          r.layout = layout_of(r.plan, cm);
          // Two planners that chose the same plan run the same job: it is
          // measured once, so that run-to-run noise cannot rank a plan
          // against itself.
          auto same = std::find_if(rows.begin() + static_cast<std::ptrdiff_t>(env_first),
                                   rows.end(), [&](const row& o) {
            return o.model == model && o.error.empty() && o.same_as.empty()
                   && o.layout == r.layout;
          });
          if (same != rows.end()) {
            r.same_as = same->planner;
            std::fprintf(stderr, "  %-15s %-10s %-16s the plan of %s, not run again\n",
                         model.c_str(), p.c_str(), name.c_str(), r.same_as.c_str());
            rows.push_back(r);
            continue;
          }
          if (!trace_dir.empty()) // the cost model's steps, to read next to the trace
            for (const auto& st : planner::make_steps(r.plan, prof, cm).steps)
              std::fprintf(stderr, "    predicted %s %d: fwd %.4f bwd %.4f ar %.4f s (wall x%.2f)\n",
                           st.type == planner::pipeline_step::kind::compute ? "stage" : "link",
                           st.stage, st.forward_s, st.backward_s, st.allreduce_s, D);
          run(r, 1);
          rows.push_back(r);
        }
      std::map<std::string, double> best_simulated; // per model, of the plans that ran
      for (size_t i = env_first; i < rows.size(); ++i)
        if (rows[i].error.empty())
          best_simulated[rows[i].model] = std::max(best_simulated[rows[i].model],
                                                   rows[i].simulated);
      for (int round = 2; round <= repeats; ++round)
        for (size_t i = env_first; i < rows.size(); ++i) {
          auto& r = rows[i];
          if (r.error.empty() && r.same_as.empty()
              && r.simulated >= contender * best_simulated[r.model])
            run(r, round);
        }
      for (size_t i = env_first; i < rows.size(); ++i)
        if (rows[i].error.empty() && rows[i].same_as.empty())
          rows[i].measured = *std::max_element(rows[i].runs.begin(), rows[i].runs.end());
      for (size_t i = env_first; i < rows.size(); ++i)
        if (!rows[i].same_as.empty())
          for (size_t k = env_first; k < rows.size(); ++k)
            if (rows[k].model == rows[i].model && rows[k].planner == rows[i].same_as) {
              rows[i].measured = rows[k].measured;
              rows[i].runs = rows[k].runs;
              rows[i].error = rows[k].error;
            }
    }
  // -- table: one line per (env, rate, model) --
  std::printf("\nMeasured samples/s in emulated time (predicted: the plan's 1F1B schedule "
              "simulated, error %%); batch %lld, %lld "
              "timed steps after %lld warm-up, synthetic data on the paper's inputs "
              "(ResNet-50: 3x224x224; models that take tokens: %lld token ids; else "
              "3x32x32); the fastest of "
              "%d runs for plans predicted at least %.2f of their row's best (marked *), "
              "one run for the others; %s device speeds, compute time %s\n\n",
              static_cast<long long>(batch), static_cast<long long>(steps),
              static_cast<long long>(warmup), static_cast<long long>(sequence_length), repeats,
              contender, speeds.c_str(), compute_time.c_str());
  std::printf("| env | Mbps | model | D | co-loc | Asteroid's B / M |");
  for (auto& p : plan_names)
    std::printf(" %s |", p.c_str());
  std::printf(" Asteroid's speedup over each |\n|---|---|---|---|---|---|");
  for (size_t i = 0; i <= plan_names.size(); ++i)
    std::printf("---|");
  std::printf("\n");
  std::vector<double> errors, formula_errors;
  int rows_total = 0, rows_won = 0, rows_tied = 0;
  std::ofstream out{csv};
  out << "env,mbps,model,planner,devices,stages,micro_batches,dilation,co_location_slowdown,"
         "predicted_sps,"
         "measured_sps,error_pct,status,runs_sps,simulated_sps\n";
  std::ofstream wide{csv + ".wide"};
  for (size_t i = 0; i < rows.size(); i += plan_names.size()) {
    auto& first = rows[i];
    std::printf("| %s | %d | %s | %.2f | %.2f | %s |", first.env.c_str(), first.mbps,
                first.model.c_str(), first.dilation, first.co_location,
                batch_and_micro_batches(rows, i, plan_names.size(), batch).c_str());
    wide << first.env << "-" << first.mbps << "-" << first.model;
    // The planner whose run a row's number comes from.
    auto run_of = [](const row& r) { return r.same_as.empty() ? r.planner : r.same_as; };
    double ours = 0;
    std::string our_run;
    for (size_t k = 0; k < plan_names.size(); ++k)
      if (rows[i + k].planner == "asteroid") {
        ours = rows[i + k].measured;
        our_run = run_of(rows[i + k]);
      }
    std::string speedups;
    bool won = true, tied = false;
    for (size_t k = 0; k < plan_names.size(); ++k) {
      auto& r = rows[i + k];
      double err = r.simulated > 0 && r.measured > 0
                     ? (r.measured - r.simulated) / r.simulated * 100 : NAN;
      if (!r.error.empty())
        std::printf(" %s |", r.error == "infeasible" ? "infeasible" : "failed");
      else if (!r.same_as.empty())
        std::printf(" = %s |", r.same_as.c_str());
      else
        std::printf(" %.2f%s (%.2f, %+.0f%%) |", r.measured, r.runs.size() > 1 ? "*" : "",
                    r.simulated, err);
      // A shared run counts once.
      if (r.error.empty() && r.same_as.empty() && !std::isnan(err)) {
        errors.push_back(std::fabs(err));
        if (r.predicted > 0)
          formula_errors.push_back(std::fabs(r.measured - r.predicted) / r.predicted * 100);
      }
      out << r.env << "," << r.mbps << "," << r.model << "," << r.planner << "," << r.devices
          << "," << r.stages << "," << r.micro_batches << "," << r.dilation << ","
          << r.co_location << ","
          << r.predicted << "," << r.measured << ","
          << (r.predicted > 0 && r.measured > 0 ? (r.measured - r.predicted) / r.predicted * 100
                                                 : 0.0)
          << ","
          << (!r.error.empty() ? r.error.substr(0, r.error.find(':'))
              : r.same_as.empty() ? "ok" : "same plan as " + r.same_as)
          << "," << join(r.runs, ";") << "," << r.simulated << "\n";
      wide << "," << r.measured;
      if (r.planner != "asteroid" && r.error.empty() && ours > 0 && r.measured > 0) {
        char cell[48];
        std::snprintf(cell, sizeof cell, "%.2fx", ours / r.measured);
        bool same_plan = run_of(r) == our_run;
        speedups += (speedups.empty() ? "" : ", ") + r.planner + " " + cell
                    + (same_plan ? " (same plan)" : "");
        tied = tied || same_plan;
        won = won && ours >= r.measured;
      }
    }
    wide << "\n";
    ++rows_total;
    rows_won += won && ours > 0;
    rows_tied += won && ours > 0 && tied;
    std::printf(" %s |\n", speedups.c_str());
  }
  out.close();
  wide.close();
  auto minutes = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start)
                   .count() / 60;
  std::printf("\nAsteroid measured >= every baseline in %d of %d rows (in %d of them "
              "Asteroid's plan is a baseline's, run once); median |prediction error| "
              "%.1f %%, worst %.1f %%, over %zu measured plans (prediction: each plan's 1F1B "
              "schedule simulated on the cost model's step times); %.1f minutes\n",
              rows_won, rows_total, rows_tied, median(errors),
              errors.empty() ? 0.0 : *std::max_element(errors.begin(), errors.end()),
              errors.size(), minutes);
  std::printf("against the closed-form round latency the planners rank by: median |error| "
              "%.1f %%, worst %.1f %%\n",
              median(formula_errors),
              formula_errors.empty()
                ? 0.0 : *std::max_element(formula_errors.begin(), formula_errors.end()));
  std::printf("wrote %s\n", csv.c_str());
  // -- the paper's Table 4 next to ours: Asteroid's speedup over on-device,
  //    data parallelism (even) and pipeline parallelism, measured and
  //    predicted, for the rows the paper reports --
  std::printf("\nTable 4 side by side: Asteroid's speedup over on-device / DP (even) / PP, "
              "measured (predicted) here and in the paper (%s device speeds, compute time "
              "%s)\n\n"
              "| env | Mbps | model | Asteroid's B / M | measured | predicted | paper |\n"
              "|---|---|---|---|---|---|---|\n",
              speeds.c_str(), compute_time.c_str());
  for (size_t i = 0; i < rows.size(); i += plan_names.size()) {
    auto paper = paper_table4(rows[i].env, rows[i].mbps, rows[i].model);
    if (!paper)
      continue;
    const row* of[4] = {nullptr, nullptr, nullptr, nullptr}; // asteroid, on-device, dp, pp
    for (size_t k = 0; k < plan_names.size(); ++k) {
      const auto& r = rows[i + k];
      int slot = r.planner == "asteroid" ? 0 : r.planner == "on-device" ? 1
                 : r.planner == "dp-even" ? 2 : r.planner == "pp" ? 3 : -1;
      if (slot >= 0 && r.error.empty())
        of[slot] = &r;
    }
    auto ratio = [&](int k, bool measured) {
      if (!of[0] || !of[k])
        return std::string("-");
      double a = measured ? of[0]->measured : of[0]->simulated;
      double b = measured ? of[k]->measured : of[k]->simulated;
      char cell[16];
      std::snprintf(cell, sizeof cell, "%.2f", b > 0 ? a / b : 0.0);
      return std::string(cell);
    };
    auto paper_cell = [](double v) {
      char cell[16];
      std::snprintf(cell, sizeof cell, "%.1f", v);
      return v > 0 ? std::string(cell) : std::string("?");
    };
    std::printf("| %s | %d | %s | %s | %s / %s / %s | %s / %s / %s | %s / %s / %s |\n",
                rows[i].env.c_str(), rows[i].mbps, rows[i].model.c_str(),
                batch_and_micro_batches(rows, i, plan_names.size(), batch).c_str(),
                ratio(1, true).c_str(),
                ratio(2, true).c_str(), ratio(3, true).c_str(), ratio(1, false).c_str(),
                ratio(2, false).c_str(), ratio(3, false).c_str(),
                paper_cell(paper->on_device).c_str(), paper_cell(paper->dp).c_str(),
                paper_cell(paper->pp).c_str());
  }
  write_plot(csv, png, plan_names);
  if (!profile_dir.empty())
    std::filesystem::remove_all(profile_dir);
  return 0;
}
