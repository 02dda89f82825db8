#include "asteroid/kernels/compute_device.hpp"
#include "asteroid/kernels/cpu_threads.hpp"

#include <catch2/catch.hpp>

using namespace asteroid::kernels;

TEST_CASE("device names for --device resolve, and a bad one is refused naming it",
          "[compute_device]") {
  CHECK(resolve_compute_device("cpu") == torch::Device(torch::kCPU));
  auto any = resolve_compute_device("auto");
  CHECK((any.is_cpu() || any == torch::Device(torch::kCUDA, 0)));
  CHECK(any.is_cuda() == (libtorch_has_cuda() && torch::cuda::device_count() > 0));
  for (auto bad : {"gpu", "cuda:", "cuda:x", "cuda:-1", "CPU", "cuda:0:1", ""})
    CHECK_THROWS_WITH(resolve_compute_device(bad),
                      Catch::Contains("expected cpu, cuda, cuda:N or auto"));
  if (!libtorch_has_cuda())
    CHECK_THROWS_WITH(resolve_compute_device("cuda"),
                      Catch::Contains("built against a LibTorch without CUDA"));
  CHECK_THROWS_WITH(resolve_compute_device("cuda:999"),
                    Catch::Contains("cuda:999")
                      && (Catch::Contains("without CUDA") || Catch::Contains("this machine has")
                          || Catch::Contains("no CUDA device")));
}

TEST_CASE("the CPU as a compute device: no copies, no GPU counters", "[compute_device]") {
  auto t = torch::randn({3, 4});
  CHECK(to_compute_device(t, torch::kCPU).data_ptr() == t.data_ptr());
  auto m = device_memory_stats(torch::kCPU);
  CHECK(m.allocated_peak == -1);
  CHECK(m.reserved_peak == -1);
  synchronize(torch::kCPU);
  reset_device_memory_peak(torch::kCPU);
  auto info = describe_device(torch::kCPU);
  CHECK(info.device == "cpu");
  CHECK(info.memory_bytes == 0);
}

TEST_CASE("CPU threads go to LibTorch and, when it is loaded, to OpenBLAS",
          "[cpu_threads]") {
  const int before = at::get_num_threads();
  CHECK_THROWS_WITH(set_cpu_threads(0), Catch::Contains("at least 1, got 0"));
  const bool openblas = openblas_threads() != -1;
  CHECK((cpu_blas_name().rfind("OpenBLAS", 0) == 0) == openblas);
  for (int n : {2, 1}) {
    set_cpu_threads(n);
    CHECK(at::get_num_threads() == n);
    if (openblas)
      CHECK(openblas_threads() == n);
  }
  set_cpu_threads(before);
}
