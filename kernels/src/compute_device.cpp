#include "asteroid/kernels/compute_device.hpp"

#ifdef ASTEROID_TORCH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <cuda_runtime_api.h>
#endif

#include <c10/core/DeviceGuard.h>
#include <torch/version.h>

#include <cctype>
#include <cstdio>
#include <exception>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>

namespace asteroid::kernels {

namespace {

/// "cuda" -> 0, "cuda:N" -> N; -1 when `name` is neither.
int cuda_index(const std::string& name) {
  if (name == "cuda")
    return 0;
  const std::string prefix = "cuda:";
  if (name.rfind(prefix, 0) != 0 || name.size() == prefix.size()
      || name.size() > prefix.size() + 3)
    return -1;
  for (auto i = prefix.size(); i < name.size(); ++i)
    if (!std::isdigit(static_cast<unsigned char>(name[i])))
      return -1;
  return std::stoi(name.substr(prefix.size()));
}

#ifdef ASTEROID_TORCH_CUDA
c10::DeviceIndex index_of(torch::Device d) {
  return d.has_index() ? d.index() : c10::DeviceIndex{0};
}
#endif

} // namespace

bool libtorch_has_cuda() {
#ifdef ASTEROID_TORCH_CUDA
  return true;
#else
  return false;
#endif
}

torch::Device resolve_compute_device(const std::string& name) {
  if (name == "cpu")
    return torch::kCPU;
  if (name == "auto")
    return libtorch_has_cuda() && torch::cuda::device_count() > 0
             ? torch::Device(torch::kCUDA, 0)
             : torch::Device(torch::kCPU);
  const int index = cuda_index(name);
  if (index < 0)
    throw std::invalid_argument("--device '" + name
                                + "': expected cpu, cuda, cuda:N or auto");
  if (!libtorch_has_cuda())
    throw std::invalid_argument(
      "--device " + name + ": this program was built against a LibTorch without CUDA ("
      + std::string(TORCH_VERSION)
      + "); build it against a CUDA LibTorch (-DCMAKE_PREFIX_PATH, docs/jetson.md) "
        "or use --device cpu");
  const auto count = static_cast<int>(torch::cuda::device_count());
  if (count == 0)
    throw std::invalid_argument("--device " + name
                                + ": LibTorch sees no CUDA device on this machine "
                                  "(no driver, or CUDA_VISIBLE_DEVICES hides them)");
  if (index >= count)
    throw std::invalid_argument("--device " + name + ": this machine has "
                                + std::to_string(count) + " CUDA device"
                                + (count == 1 ? "" : "s") + " (cuda:0 to cuda:"
                                + std::to_string(count - 1) + ")");
  return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(index));
}

device_info describe_device(torch::Device d) {
  device_info info;
  if (!d.is_cuda())
    return info;
#ifdef ASTEROID_TORCH_CUDA
  cudaDeviceProp p{};
  auto err = cudaGetDeviceProperties(&p, index_of(d));
  if (err != cudaSuccess)
    throw std::runtime_error("cannot read the properties of " + d.str() + ": "
                             + cudaGetErrorString(err));
  info.device = torch::Device(torch::kCUDA, index_of(d)).str();
  info.name = p.name;
  info.memory_bytes = static_cast<int64_t>(p.totalGlobalMem);
  info.library_workspace_bytes = library_workspace_bytes(d);
  return info;
#else
  throw std::logic_error("describe_device: " + d.str() + " in a build without CUDA");
#endif
}

int64_t library_workspace_bytes(torch::Device d) {
  if (!d.is_cuda())
    return 0;
  static std::mutex mutex;
  static std::map<int, int64_t> measured;
  std::lock_guard<std::mutex> lock(mutex);
  const int index = d.has_index() ? d.index() : 0;
  if (auto it = measured.find(index); it != measured.end())
    return it->second;
  const torch::Device dev(torch::kCUDA, static_cast<c10::DeviceIndex>(index));
  synchronize(dev);
  const auto before = std::max<int64_t>(device_memory_stats(dev).allocated_now, 0);
  std::exception_ptr failure;
  std::thread probe([&] {
    try {
      c10::DeviceGuard guard(dev);
      auto opts = torch::TensorOptions().device(dev).requires_grad(true);
      auto x = torch::randn({64, 256}, opts);
      auto w = torch::randn({256, 256}, opts);
      torch::matmul(x, w).sum().backward();
      auto image = torch::randn({4, 8, 16, 16}, opts);
      auto kernel = torch::randn({8, 8, 3, 3}, opts);
      torch::conv2d(image, kernel, {}, 1, 1).sum().backward();
      synchronize(dev);
    } catch (...) {
      failure = std::current_exception();
    }
  });
  probe.join();
  if (failure) {
    // A probe that fails (out of memory on a small board) must not stop the
    // node: it plans without the term, and says so once.
    std::string why = "unknown error";
    try {
      std::rethrow_exception(failure);
    } catch (const std::exception& e) {
      why = e.what();
    } catch (...) {
    }
    std::fprintf(stderr, "warning: measuring the GPU libraries' workspace on %s failed (%s); "
                         "counting 0\n",
                 dev.str().c_str(), why.c_str());
    return measured[index] = 0;
  }
  synchronize(dev);
  const auto after = std::max<int64_t>(device_memory_stats(dev).allocated_now, 0);
  return measured[index] = std::max<int64_t>(after - before, 0);
}

void synchronize(torch::Device d) {
  if (d.is_cuda())
    torch::cuda::synchronize(d.has_index() ? d.index() : -1);
}

device_memory device_memory_stats(torch::Device d) {
  device_memory m;
#ifdef ASTEROID_TORCH_CUDA
  if (d.is_cuda()) {
    // Index 0 of each statistic is the aggregate over all pool kinds, in
    // LibTorch 1.x and 2.x alike.
    // LibTorch 2.x's allocator refuses a device it has not allocated on
    // yet ("Invalid device argument"): nothing is held there then.
    m.allocated_now = m.allocated_peak = m.reserved_peak = 0;
    try {
      auto s = c10::cuda::CUDACachingAllocator::getDeviceStats(index_of(d));
      m.allocated_now = s.allocated_bytes[0].current;
      m.allocated_peak = s.allocated_bytes[0].peak;
      m.reserved_peak = s.reserved_bytes[0].peak;
    } catch (const c10::Error&) {
    }
  }
#else
  (void)d;
#endif
  return m;
}

void reset_device_memory_peak(torch::Device d) {
#ifdef ASTEROID_TORCH_CUDA
  if (d.is_cuda())
    try {
      c10::cuda::CUDACachingAllocator::resetPeakStats(index_of(d));
    } catch (const c10::Error&) {
      // nothing allocated there yet (see device_memory_stats)
    }
#else
  (void)d;
#endif
}

torch::Tensor to_compute_device(const torch::Tensor& t, torch::Device d) {
  if (!t.defined() || t.device() == d)
    return t;
  if (d.is_cuda() && t.device().is_cpu())
    return t.pin_memory().to(d, /*non_blocking=*/true);
  return t.to(d);
}

} // namespace asteroid::kernels
