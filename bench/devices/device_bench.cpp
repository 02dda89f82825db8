// One node computing on a GPU against one node computing on the CPU, measured
// side by side in one run: the same model, data, plan and optimizer through
// the whole framework (supervisor, node process, replica actor, snapshots),
// each node alone on its machine. Prints samples/s of both and their ratio.
// Needs a CUDA LibTorch and a GPU for the GPU row; without one it says so
// and exits 2.
#include "../measuring_job.hpp"
#include "../median.hpp"

#include "asteroid/actors/job.hpp"
#include "asteroid/actors/node.hpp"
#include "asteroid/data/make_dataset.hpp"
#include "asteroid/kernels/allocator.hpp"
#include "asteroid/kernels/compute_device.hpp"
#include "asteroid/planner/given_plan.hpp"
#include "asteroid/training/model_registry.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <thread>

using namespace asteroid;
using nlohmann::json;

namespace {

struct node_run {
  double samples_per_s = 0; ///< median over the timed steps
  double step_s = 0;
  double compute_s = 0;     ///< the replica's own compute in a step (median)
  int64_t peak_bytes = -1;  ///< the node's measured peak (GPU: the allocator's)
};

using asteroid::bench::median;

node_run run_on(const std::string& device, int threads, const std::string& model_name,
                std::shared_ptr<data::dataset> train, int64_t batch, int64_t steps,
                int64_t warmup, uint16_t port) {
  actors::local_cluster::options co;
  co.exe = ASTEROID_CLI_PATH;
  co.nodes = 1;
  co.base_port = port;
  co.devices = {device};
  co.threads = threads;
  co.memory = {int64_t{64} << 30};
  actors::local_cluster cluster{co};
  torch::manual_seed(1);
  auto model = training::build_model(model_name, json::object());
  auto p = planner::given_plan("bench", batch, 1,
                               {{0, static_cast<int>(model->size()), {0}, {batch}}});
  auto job = bench::measuring_job(model_name, p, steps + warmup, cluster.endpoints());
  caf::actor_system_config cfg;
  actors::configure(cfg);
  caf::actor_system sys{cfg};
  auto devices = actors::connect_all(sys, job.nodes, std::chrono::seconds(3));
  auto r = actors::run_job(sys, job, devices, model, train, nullptr);
  std::vector<double> times, busy;
  node_run out;
  for (size_t i = static_cast<size_t>(warmup); i < r.iterations.size(); ++i) {
    times.push_back(r.iterations[i]["seconds"].get<double>());
    const auto& rep = r.iterations[i]["replicas"][0];
    busy.push_back(rep["busy_s"].get<double>());
    out.peak_bytes = std::max(out.peak_bytes, rep.value("job_peak_bytes", int64_t{-1}));
  }
  out.step_s = median(times);
  out.compute_s = median(busy);
  out.samples_per_s = out.step_s > 0 ? static_cast<double>(batch) / out.step_s : 0;
  return out;
}

} // namespace

int main(int argc, char** argv) {
  kernels::keep_tensor_buffers_in_heap();
  CLI::App app{"Asteroid: one GPU node against one CPU node (samples/s)"};
  std::string model = "resnet18";
  std::string gpu = "cuda:0";
  int64_t batch = 64, steps = 20, warmup = 3;
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  uint16_t port = 27660;
  app.add_option("--model", model, "model (input shape from the zoo)")->capture_default_str();
  app.add_option("--gpu", gpu, "the GPU node's --device")->capture_default_str();
  app.add_option("--batch", batch, "mini-batch size")->capture_default_str();
  app.add_option("--steps", steps, "timed steps (median kept)")->capture_default_str();
  app.add_option("--warmup", warmup, "untimed steps first")->capture_default_str();
  app.add_option("--cpu-threads", threads,
                 "LibTorch threads of the CPU node (default: every core here)")
    ->capture_default_str();
  app.add_option("--base-port", port, "ports port and port + 1")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (std::string(ASTEROID_CLI_PATH).empty()) {
    std::fprintf(stderr, "device_bench: the asteroid program is not built\n");
    return 2;
  }
  torch::Device gpu_device = torch::kCPU;
  try {
    gpu_device = kernels::resolve_compute_device(gpu);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "device_bench: no GPU row: %s\n", e.what());
    return 2;
  }
  auto info = kernels::describe_device(gpu_device);
  auto probe = training::build_model(model, json::object());
  data::dataset_options dopts;
  dopts.count = batch * (steps + warmup);
  dopts.shape = probe->input_shape(0);
  dopts.num_classes = 10;
  dopts.seed = 7;
  auto train = data::make_dataset("synthetic-images", dopts);
  std::printf("device_bench: %s, batch %lld, %lld timed steps after %lld, one node "
              "each, the framework end to end\n",
              model.c_str(), static_cast<long long>(batch), static_cast<long long>(steps),
              static_cast<long long>(warmup));
  auto cpu_row = run_on("cpu", threads, model, train, batch, steps, warmup, port);
  auto gpu_row = run_on(gpu, 1, model, train, batch, steps, warmup, port + 1);
  std::printf("%-34s %12s %10s %12s %14s\n", "node", "samples/s", "step s", "compute s",
              "peak MiB");
  auto row = [](const std::string& name, const node_run& r) {
    std::printf("%-34s %12.1f %10.4f %12.4f %14.1f\n", name.c_str(), r.samples_per_s,
                r.step_s, r.compute_s, static_cast<double>(r.peak_bytes) / (1 << 20));
  };
  row("cpu (" + std::to_string(threads) + " threads)", cpu_row);
  row(info.device + " " + info.name, gpu_row);
  std::printf("GPU node / CPU node: %.2fx samples/s\n",
              cpu_row.samples_per_s > 0 ? gpu_row.samples_per_s / cpu_row.samples_per_s : 0);
  return 0;
}
