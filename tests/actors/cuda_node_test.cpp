// CUDA nodes (built where the LibTorch has CUDA and ASTEROID_GPU_TESTS is
// on; they fail, not skip, when no GPU answers): node processes computing on
// a GPU train to the weights of single-device CPU training, alone and in one
// job with CPU nodes, and report their GPU; compressed links encode and
// decode on the GPU. Ports 27640-27648 and 27540-27542.
#include "asteroid/actors/node_capabilities.hpp"
#include "asteroid/kernels/compute_device.hpp"

#include "job_test_helpers.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>

using namespace asteroid;
using namespace asteroid::test;
using namespace std::chrono_literals;

namespace {

actors::local_cluster::options gpu_cluster(std::vector<std::string> devices,
                                           uint16_t port) {
  REQUIRE(torch::cuda::is_available());
  auto o = cluster_options(static_cast<int>(devices.size()), port);
  o.devices = std::move(devices);
  return o;
}

/// Every replica of the last iteration ran where `expected(replica)` says,
/// and a GPU replica's measured peak is the caching allocator's (> 0, within
/// what the driver gave it).
void check_devices(const actors::job_result& r,
                   const std::function<std::string(const nlohmann::json&)>& expected) {
  for (auto& rep : r.iterations.back()["replicas"]) {
    INFO(rep.dump());
    CHECK(rep["compute_device"] == expected(rep));
    if (rep["compute_device"] != "cpu") {
      CHECK(rep["job_peak_bytes"].get<int64_t>() > 0);
      CHECK(rep["job_peak_bytes"].get<int64_t>()
            <= rep["device_reserved_peak_bytes"].get<int64_t>());
    }
  }
}

} // namespace

TEST_CASE("CUDA nodes: a cnn over 3 GPU node processes ends 20 steps within "
          "1e-3 of single-device CPU training") {
  actors::local_cluster cluster{gpu_cluster({"cuda", "cuda", "cuda"}, 27640)};
  auto train = synthetic(16 * 20);
  // cnn: conv1, conv2, fc1, classifier; stage 1 on two nodes, 5 + 3 rows.
  auto job = base_job("cnn", make_plan(16, 2, {{0, 2, {0}, {8}},
                                              {2, 4, {1, 2}, {5, 3}}}));
  job.optimizer.lr = 0.02;
  auto r = run_on_cluster(job, cluster, train);
  CHECK(r.steps == 20);
  auto diff = max_abs_diff(r.model, reference(job, *train));
  INFO("max abs diff " << diff);
  CHECK(diff < 1e-3);
  check_devices(r, [](const nlohmann::json&) { return std::string("cuda:0"); });
  std::printf("[cuda cnn 3 GPU nodes] max abs diff %.3g after 20 steps, %.1f samples/s\n",
              diff, r.samples_per_s);
}

TEST_CASE("CUDA and CPU nodes in one job: each group mixes a GPU and a CPU "
          "node, and training matches single-device CPU training to 1e-3") {
  actors::local_cluster cluster{gpu_cluster({"cuda", "cpu", "cpu", "cuda"}, 27643)};
  auto train = synthetic(16 * 20);
  auto job = base_job("mlp", make_plan(16, 2, {{0, 2, {0, 1}, {3, 5}},
                                               {2, 3, {2, 3}, {6, 2}}}));
  job.optimizer.kind = training::optimizer_kind::adam;
  job.optimizer.lr = 0.001;
  auto r = run_on_cluster(job, cluster, train);
  CHECK(r.steps == 20);
  auto diff = max_abs_diff(r.model, reference(job, *train));
  INFO("max abs diff " << diff);
  CHECK(diff < 1e-3);
  // Stage 0: replica 0 on node0 (GPU), 1 on node1 (CPU); stage 1: replica 0
  // on node2 (CPU), 1 on node3 (GPU).
  check_devices(r, [](const nlohmann::json& rep) {
    int s = rep["stage"];
    std::string label = rep["replica"];
    bool first = label.rfind("s" + std::to_string(s) + "r0", 0) == 0;
    return (s == 0) == first ? std::string("cuda:0") : std::string("cpu");
  });
  std::printf("[cuda mixed 2 GPU + 2 CPU nodes] max abs diff %.3g after 20 steps\n", diff);
}

TEST_CASE("CUDA nodes with compressed links: the codecs run on the GPU, every link carries "
          "the CPU run's byte count, and training ends where the same job on CPU devices "
          "ends") {
  // cnn: conv1, conv2 | fc1, classifier; stage 1 on two devices (5 + 3 rows),
  // int8-channel activations, fp16 gradients with error feedback and fp16
  // all-reduce chunks: every codec kernel runs on the GPU nodes.
  auto train = synthetic(16 * 20);
  auto job = base_job("cnn", make_plan(16, 2, {{0, 2, {0}, {8}},
                                              {2, 4, {1, 2}, {5, 3}}}));
  job.optimizer.lr = 0.02;
  job.compression.activations = "int8-channel";
  job.compression.gradients = "fp16";
  job.compression.error_feedback = true;
  job.compression.all_reduce = "fp16";
  job.check_replicas = true;
  actors::job_result on_cpu;
  {
    in_process env{3};
    on_cpu = actors::run_job(*env.sys, job, env.devices, fresh_model("cnn", job.seed), train,
                             nullptr);
  }
  actors::local_cluster cluster{gpu_cluster({"cuda", "cuda", "cuda"}, 27540)};
  auto on_gpu = run_on_cluster(job, cluster, train);
  CHECK(on_gpu.steps == 20);
  // The same codecs on the same shapes: the same byte count on every link
  // (kernels_cuda_tests compares the bytes themselves).
  CHECK(on_gpu.iterations.back()["link_bytes"] == on_cpu.iterations.back()["link_bytes"]);
  CHECK(on_gpu.replica_divergence == 0);
  auto diff = max_abs_diff(on_gpu.model, on_cpu.model);
  INFO("max abs diff from the CPU run " << diff);
  CHECK(diff < 1e-2);
  check_devices(on_gpu, [](const nlohmann::json&) { return std::string("cuda:0"); });
  std::printf("[cuda compressed links, 3 GPU nodes] max abs diff %.3g from the same job on "
              "CPU devices after 20 steps\n",
              diff);
}

TEST_CASE("a CUDA node reports its GPU's name and memory in its capabilities") {
  actors::local_cluster cluster{gpu_cluster({"cuda:0", "cpu"}, 27647)};
  caf::actor_system_config cfg;
  actors::configure(cfg);
  caf::actor_system sys{cfg};
  auto devices = actors::connect_all(sys, cluster.endpoints(), 3s);
  caf::scoped_actor self{sys};
  std::vector<nlohmann::json> caps;
  for (auto& d : devices)
    self->request(d, 5s, actors::caps_atom::value)
      .receive([&](std::string& s) { caps.push_back(nlohmann::json::parse(s)); },
               [&](caf::error& e) { FAIL(sys.render(e)); });
  REQUIRE(caps.size() == 2);
  INFO(caps[0].dump() << "\n" << caps[1].dump());
  auto gpu = kernels::describe_device(torch::Device(torch::kCUDA, 0));
  CHECK(caps[0]["compute_device"] == "cuda:0");
  CHECK(caps[0]["device_name"] == gpu.name);
  CHECK(caps[0]["device_memory_bytes"] == gpu.memory_bytes);
  CHECK(gpu.memory_bytes > (int64_t{1} << 30));
  CHECK(caps[1]["compute_device"] == "cpu");
  CHECK(caps[1]["device_memory_bytes"] == 0);
  // What its GPU libraries keep comes off what the planner may give it.
  CHECK(caps[0]["library_workspace_bytes"].get<int64_t>() >= 0);
  CHECK(caps[1]["library_workspace_bytes"] == 0);
  CHECK(actors::plannable_memory_bytes(caps[0])
        == caps[0]["memory_bytes"].get<int64_t>()
             - caps[0]["library_workspace_bytes"].get<int64_t>());
  std::printf("[cuda capabilities] GPU library workspace %.2f MiB\n",
              caps[0]["library_workspace_bytes"].get<double>() / (1 << 20));
}
