// The kernels on a GPU against their CPU path (built where the LibTorch has
// CUDA and ASTEROID_GPU_TESTS is on; they fail, not skip, when no GPU
// answers). With nvcc the bucket copies and the weighted sum run the
// project's own CUDA kernels (kernels/src/cuda), otherwise ATen's.
#include "asteroid/kernels/bucket.hpp"
#include "asteroid/kernels/compute_device.hpp"
#include "asteroid/kernels/weighted_sum.hpp"
#include "asteroid/kernels/wire_codec.hpp"

#include <catch2/catch.hpp>

#include <thread>

using namespace asteroid::kernels;

namespace {

torch::Device gpu() {
  REQUIRE(torch::cuda::is_available());
  return {torch::kCUDA, 0};
}

std::vector<torch::Tensor> on(const std::vector<torch::Tensor>& ts, torch::Device d) {
  std::vector<torch::Tensor> out;
  for (const auto& t : ts)
    out.push_back(t.to(d));
  return out;
}

} // namespace

TEST_CASE("CUDA: bucket flatten and unflatten give the CPU path's bytes", "[cuda]") {
  torch::manual_seed(4);
  for (auto dtype : {torch::kFloat32, torch::kFloat16, torch::kBFloat16, torch::kFloat64}) {
    INFO(c10::toString(dtype));
    std::vector<torch::Tensor> cpu{torch::randn({300, 7}), torch::randn({1}),
                                   torch::randn({64, 3, 3, 3}), torch::randn({4097})};
    for (auto& t : cpu)
      t = t.to(dtype);
    auto dev = on(cpu, gpu());
    // A limit that splits them into several buckets, one tensor across none.
    auto cpu_buckets = flatten_into_buckets(cpu, 8 << 10);
    auto gpu_buckets = flatten_into_buckets(dev, 8 << 10);
    REQUIRE(cpu_buckets.size() == gpu_buckets.size());
    REQUIRE(cpu_buckets.size() > 1);
    for (size_t i = 0; i < cpu_buckets.size(); ++i) {
      CHECK(gpu_buckets[i].flat.is_cuda());
      CHECK(torch::equal(gpu_buckets[i].flat.cpu(), cpu_buckets[i].flat));
      gpu_buckets[i].flat.mul_(3);
      cpu_buckets[i].flat.mul_(3);
    }
    for (auto& t : dev)
      t.zero_();
    unflatten_from_buckets(gpu_buckets, dev);
    unflatten_from_buckets(cpu_buckets, cpu);
    for (size_t i = 0; i < cpu.size(); ++i)
      CHECK(torch::equal(dev[i].cpu(), cpu[i]));
  }
}

TEST_CASE("CUDA: the weighted accumulate and scale agree with the CPU path", "[cuda]") {
  torch::manual_seed(5);
  struct tolerance {
    torch::Dtype dtype;
    double atol;
  };
  // fp32 and fp64: fused multiply-add against ATen's separate rounding.
  for (auto [dtype, atol] : {tolerance{torch::kFloat32, 1e-6}, tolerance{torch::kFloat64, 1e-12},
                             tolerance{torch::kFloat16, 2e-3}, tolerance{torch::kBFloat16, 2e-2}}) {
    INFO(c10::toString(dtype));
    auto dst = torch::randn({100003}).to(dtype);
    auto src = torch::randn({100003}).to(dtype);
    auto dst_gpu = dst.to(gpu());
    auto src_gpu = src.to(gpu());
    weighted_sum_(dst, src, 0.375);
    weighted_sum_(dst_gpu, src_gpu, 0.375);
    CHECK(torch::allclose(dst_gpu.cpu().to(torch::kFloat64), dst.to(torch::kFloat64), 0, atol));
    scale_(dst, -1.5);
    scale_(dst_gpu, -1.5);
    CHECK(torch::allclose(dst_gpu.cpu().to(torch::kFloat64), dst.to(torch::kFloat64), 0,
                          2 * atol));
  }
}

TEST_CASE("CUDA: the wire codecs encode to the CPU path's bytes and decode to its values",
          "[cuda]") {
  torch::manual_seed(6);
  auto with_zero_channel = torch::randn({8, 16, 5, 5});
  with_zero_channel.select(1, 3).zero_();
  // Matrices, images with a channel of zeros, a 1-D tensor, more channels
  // than one launch's grid rows, a non-contiguous view and other dtypes.
  std::vector<torch::Tensor> inputs{torch::randn({300, 7}) * 40,
                                    with_zero_channel,
                                    torch::randn({4097}),
                                    torch::randn({2, 70000}),
                                    torch::randn({33, 65}).t(),
                                    torch::randn({64, 10}, torch::kFloat64),
                                    torch::randn({64, 10}).to(torch::kFloat16),
                                    torch::zeros({5, 4})};
  for (auto codec : {wire_codec::fp16, wire_codec::bf16, wire_codec::int8,
                     wire_codec::int8_channel}) {
    for (size_t k = 0; k < inputs.size(); ++k) {
      INFO(to_string(codec) << " input " << k << " " << inputs[k].sizes() << " "
                            << c10::toString(inputs[k].scalar_type()));
      const auto& x = inputs[k];
      auto on_cpu = encode(x, codec);
      auto on_gpu = encode(x.to(gpu()), codec);
      REQUIRE(on_gpu.values.is_cuda());
      REQUIRE(on_gpu.values.scalar_type() == on_cpu.values.scalar_type());
      REQUIRE(on_gpu.values.sizes() == on_cpu.values.sizes());
      auto differing = on_gpu.values.cpu().ne(on_cpu.values).sum().item<int64_t>();
      CHECK(differing == 0);
      CHECK(on_gpu.scale.defined() == on_cpu.scale.defined());
      if (on_cpu.scale.defined()) {
        REQUIRE(on_gpu.scale.sizes() == on_cpu.scale.sizes());
        CHECK(torch::equal(on_gpu.scale.cpu(), on_cpu.scale));
      }
      auto back_cpu = decode(on_cpu, codec);
      auto back_gpu = decode(on_gpu, codec);
      CHECK(back_gpu.is_cuda());
      CHECK(back_gpu.scalar_type() == torch::kFloat32);
      CHECK(torch::equal(back_gpu.cpu(), back_cpu));
      // Host bytes received from a link decode on the GPU as on the host.
      auto moved = to_device(on_cpu, gpu());
      CHECK(torch::equal(decode(moved, codec).cpu(), back_cpu));
    }
  }
  // Error feedback keeps its residual on the GPU and agrees with the host's.
  error_feedback host(wire_codec::fp16), device(wire_codec::fp16);
  for (int step = 0; step < 3; ++step) {
    auto g = torch::randn({1000}) * 1e-3;
    auto a = host.encode(7, g);
    auto b = device.encode(7, g.to(gpu()));
    CHECK(torch::equal(b.values.cpu(), a.values));
  }
  // The checks of decode hold for GPU values too.
  auto bad = encode(torch::randn({4, 6}).to(gpu()), wire_codec::int8_channel);
  bad.scale = bad.scale.slice(0, 0, 5);
  CHECK_THROWS_WITH(decode(bad, wire_codec::int8_channel),
                    Catch::Contains("5 scales do not fit values of shape [4, 6]"));
}

TEST_CASE("CUDA: tensors cross to the device through pinned memory and back unchanged",
          "[cuda]") {
  auto host = torch::randn({257, 33});
  auto dev = to_compute_device(host, gpu());
  CHECK(dev.is_cuda());
  CHECK(torch::equal(dev.cpu(), host));
  // The source is not aliased: changing it after the (non-blocking) copy
  // does not change what arrived.
  synchronize(gpu());
  host.add_(1);
  CHECK_FALSE(torch::equal(dev.cpu(), host));
  CHECK(to_compute_device(dev, gpu()).data_ptr() == dev.data_ptr());
}

TEST_CASE("CUDA: the caching allocator's peak is measured and can be reset", "[cuda]") {
  auto d = gpu();
  synchronize(d);
  reset_device_memory_peak(d);
  auto before = device_memory_stats(d);
  CHECK(before.allocated_now >= 0);
  int64_t peak = 0;
  {
    auto big = torch::empty({64 << 20}, torch::dtype(torch::kFloat32).device(d)); // 256 MiB
    peak = device_memory_stats(d).allocated_peak;
  }
  CHECK(peak - before.allocated_now >= (int64_t{256} << 20));
  CHECK(device_memory_stats(d).reserved_peak >= peak);
  reset_device_memory_peak(d);
  CHECK(device_memory_stats(d).allocated_peak < peak);
  auto info = describe_device(d);
  CHECK(info.device == "cuda:0");
  CHECK(info.library_workspace_bytes == library_workspace_bytes(d)); // measured once
  CHECK_FALSE(info.name.empty());
  CHECK(info.memory_bytes > 0);
}

TEST_CASE("CUDA: the GPU libraries' workspace is measured once, and a compute thread after "
          "the probe takes the probe's instead of adding its own",
          "[cuda]") {
  auto d = gpu();
  const auto workspace = library_workspace_bytes(d);
  CHECK(workspace >= 0);
  CHECK(library_workspace_bytes(d) == workspace);
  synchronize(d);
  const auto before = device_memory_stats(d).allocated_now;
  std::thread([&] {
    auto opts = torch::TensorOptions().device(d).requires_grad(true);
    auto x = torch::randn({32, 128}, opts);
    auto w = torch::randn({128, 128}, opts);
    torch::matmul(x, w).sum().backward();
    synchronize(d);
  }).join();
  synchronize(d);
  const auto added = device_memory_stats(d).allocated_now - before;
  std::printf("[cuda workspace] probe %.2f MiB; a later compute thread added %.2f MiB\n",
              workspace / 1048576.0, added / 1048576.0);
  CHECK(added == 0);
}
