// Predicted against measured memory per node (issue #22), side by side in
// one run: for each model and micro-batch count, a 2-stage plan over two node
// processes (one device each) runs a few steps, and each node's measured peak
// is printed next to the planner's prediction for that device (the cost
// model, from a profile of the model taken here on the nodes' kind of device)
// and the node's own (replica_footprint, from the model's shapes). On a GPU
// node the measured peak is the CUDA caching allocator's peak of allocated
// bytes; on a CPU node two are printed: the resident high-water mark above
// what the process held when the job claimed it (what the budget is checked
// against, docs/runtime.md, "Memory budgets") and the peak of the bytes
// LibTorch's CPU allocator held for tensors (what the planner's model
// describes).
#include "../command_lists.hpp"
#include "../measuring_job.hpp"

#include "asteroid/actors/job.hpp"
#include "asteroid/actors/node.hpp"
#include "asteroid/data/make_dataset.hpp"
#include "asteroid/kernels/allocator.hpp"
#include "asteroid/kernels/compute_device.hpp"
#include "asteroid/planner/cost_model.hpp"
#include "asteroid/planner/given_plan.hpp"
#include "asteroid/training/model_registry.hpp"
#include "asteroid/training/profiler.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

using namespace asteroid;
using nlohmann::json;
using bench::split_list;

namespace {

std::shared_ptr<data::dataset> data_for(const models::sequential_model& model, int64_t count) {
  data::dataset_options o;
  o.count = count;
  o.num_classes = 10;
  o.seed = 7;
  if (model->input_dtype() == torch::kLong) {
    o.length = model->input_shape(0).at(0);
    return data::make_dataset("synthetic-tokens", o);
  }
  o.shape = model->input_shape(0);
  return data::make_dataset("synthetic-images", o);
}

double mib(int64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

} // namespace

int main(int argc, char** argv) {
  kernels::keep_tensor_buffers_in_heap();
  CLI::App app{"Asteroid: predicted against measured memory per node"};
  std::string models_text = "cnn,mobilenet_v2,resnet18,resnet50,bert_small";
  std::string micro_text = "2,4";
  std::string device = "cpu";
  int64_t batch = 32, steps = 3;
  uint16_t port = 27664;
  app.add_option("--models", models_text, "models, comma-separated")->capture_default_str();
  app.add_option("--micro-batches", micro_text, "micro-batch counts, comma-separated")
    ->capture_default_str();
  app.add_option("--device", device, "the nodes' --device (and where the profile is taken)")
    ->capture_default_str();
  app.add_option("--batch", batch, "mini-batch size")->capture_default_str();
  app.add_option("--steps", steps, "steps per run (the peak is the highest)")
    ->capture_default_str();
  app.add_option("--base-port", port, "ports port and port + 1")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (std::string(ASTEROID_CLI_PATH).empty()) {
    std::fprintf(stderr, "memory_bench: the asteroid program is not built\n");
    return 2;
  }
  const auto where = kernels::resolve_compute_device(device);
  std::vector<int64_t> micro_batches;
  for (auto& m : split_list(micro_text))
    micro_batches.push_back(std::stoll(m));
  std::printf("memory_bench: 2 stages on 2 %s nodes, batch %lld, %lld steps; measured: %s\n",
              where.str().c_str(), static_cast<long long>(batch),
              static_cast<long long>(steps),
              where.is_cuda() ? "CUDA caching allocator's peak of allocated bytes"
                              : "resident high-water mark above the node's baseline");
  const bool cpu = !where.is_cuda();
  if (cpu)
    std::printf("%-13s %3s %5s %12s %12s %12s %9s %12s %9s\n", "model", "M", "stage",
                "planner MiB", "node MiB", "resident MiB", "res/plan", "tensors MiB",
                "ten/plan");
  else
    // A GPU replica's prediction is the planner's stage footprint plus what
    // the node measured its GPU libraries to keep (kernels::
    // library_workspace_bytes), which the planner leaves out of its budget.
    std::printf("%-13s %3s %5s %12s %9s %12s %12s %9s %9s\n", "model", "M", "stage",
                "planner MiB", "libs MiB", "node MiB", "measured MiB", "meas/plan",
                "meas/p+l");
  int rows = 0, within = 0, tensors_within = 0;
  std::vector<double> errors, tensor_errors;
  for (const auto& name : split_list(models_text)) {
    torch::manual_seed(1);
    auto probe = training::build_model(name, json::object());
    const int L = static_cast<int>(probe->size());
    const int cut = L / 2;
    const int64_t largest_share = batch / *std::min_element(micro_batches.begin(), micro_batches.end());
    training::profiler_options po;
    po.batch_sizes = {1, largest_share};
    po.warmup = 1;
    po.repeats = 1;
    po.compute_device = where;
    po.device = where.str();
    auto profile = training::profile_model(probe, name, po);
    // The bench's jobs snapshot every step (the default), as the supervisor
    // tells its planner; on GPU nodes the copy goes to host memory.
    profile.state_snapshots = !where.is_cuda();
    probe = nullptr;
    for (auto M : micro_batches) {
      const int64_t share = batch / M;
      auto p = planner::given_plan("bench", batch, static_cast<int>(M),
                                   {{0, cut, {0}, {share}}, {cut, L, {1}, {share}}});
      auto cluster = planner::cluster::uniform(
        "bench", {{"node0", "local", 1.0, int64_t{64} << 30, ""},
                  {"node1", "local", 1.0, int64_t{64} << 30, ""}},
        1e9);
      planner::cost_tables tables(profile, share);
      auto planned = planner::memory_per_device(p, tables, cluster);

      actors::local_cluster::options co;
      co.exe = ASTEROID_CLI_PATH;
      co.nodes = 2;
      co.base_port = port;
      co.devices = {device};
      co.memory = {int64_t{64} << 30};
      actors::local_cluster nodes{co};
      auto job = bench::measuring_job(name, p, steps, nodes.endpoints());
      job.optimizer.lr = 0.01;
      // Both nodes build large stages at once on what may be a small host:
      // a node busy building is not a lost one here.
      job.fault_tolerance.heartbeat_ms = 500;
      job.fault_tolerance.heartbeat_misses = 20;
      auto model = training::build_model(name, json::object());
      auto train = data_for(model, batch * steps);
      caf::actor_system_config cfg;
      actors::configure(cfg);
      caf::actor_system sys{cfg};
      auto devices = actors::connect_all(sys, job.nodes, std::chrono::seconds(3));
      actors::job_result r;
      try {
        r = actors::run_job(sys, job, devices, model, train, nullptr);
      } catch (const std::exception& e) {
        // One failed run (a step timed out on a loaded host) costs its rows,
        // not the others: it is counted as outside the 15 %.
        std::printf("%-13s %3lld  failed: %s\n", name.c_str(), static_cast<long long>(M),
                    e.what());
        rows += 2;
        errors.push_back(1.0);
        errors.push_back(1.0);
        tensor_errors.push_back(1.0);
        tensor_errors.push_back(1.0);
        std::fflush(stdout);
        continue;
      }
      std::vector<int64_t> measured(2, -1), tensors(2, -1), node_predicted(2, 0), libs(2, 0);
      for (const auto& it : r.iterations)
        for (const auto& rep : it["replicas"]) {
          int s = rep["stage"];
          measured[s] = std::max(measured[s], rep.value("job_peak_bytes", int64_t{-1}));
          tensors[s] = std::max(tensors[s], rep.value("tensor_peak_bytes", int64_t{-1}));
          node_predicted[s] = rep.value("predicted_bytes", int64_t{0});
          libs[s] = rep.value("library_workspace_bytes", int64_t{0});
        }
      for (int s = 0; s < 2; ++s) {
        auto ratio_of = [&](int64_t bytes, int64_t prediction) {
          return prediction > 0 ? static_cast<double>(bytes) / prediction : 0;
        };
        const double plain_ratio = ratio_of(measured[s], planned[s]);
        double ratio = ratio_of(measured[s], planned[s] + libs[s]);
        double tensor_ratio = ratio_of(tensors[s], planned[s]);
        ++rows;
        within += std::abs(ratio - 1) <= 0.15;
        errors.push_back(std::abs(ratio - 1));
        tensors_within += std::abs(tensor_ratio - 1) <= 0.15;
        tensor_errors.push_back(std::abs(tensor_ratio - 1));
        if (cpu)
          std::printf("%-13s %3lld %5d %12.2f %12.2f %12.2f %9.2f %12.2f %9.2f\n", name.c_str(),
                      static_cast<long long>(M), s, mib(planned[s]), mib(node_predicted[s]),
                      mib(measured[s]), ratio, mib(tensors[s]), tensor_ratio);
        else
          std::printf("%-13s %3lld %5d %12.2f %9.2f %12.2f %12.2f %9.2f %9.2f\n", name.c_str(),
                      static_cast<long long>(M), s, mib(planned[s]), mib(libs[s]),
                      mib(node_predicted[s]), mib(measured[s]), plain_ratio, ratio);
      }
      std::fflush(stdout);
    }
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
  };
  std::printf("within 15 %% of the planner%s: %d of %d rows; median |measured/planned - 1| = "
              "%.2f\n",
              cpu ? "" : " plus the GPU libraries' workspace", within, rows, median(errors));
  if (cpu)
    std::printf("tensors within 15 %% of the planner: %d of %d rows; median "
                "|tensors/planned - 1| = %.2f\n",
                tensors_within, rows, median(tensor_errors));
  return 0;
}
