// Torch-facing glue for the CUDA kernels; compiled only with ASTEROID_WITH_CUDA.

#include "cuda_ops.hpp"

#include "cuda/launch.hpp"

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <stdexcept>

namespace asteroid::kernels::detail {

namespace {

cuda::float_kind kind_of(torch::Dtype d) {
  switch (d) {
  case torch::kFloat32: return cuda::float_kind::f32;
  case torch::kFloat64: return cuda::float_kind::f64;
  case torch::kFloat16: return cuda::float_kind::f16;
  case torch::kBFloat16: return cuda::float_kind::bf16;
  default: throw std::invalid_argument("no CUDA kernel for dtype " + std::string(c10::toString(d)));
  }
}

// Ships the job list to the device through torch's caching allocator, so it
// is ordered on the current stream like every other torch allocation.
void run_jobs(const std::vector<cuda::copy_job>& jobs, std::size_t max_bytes,
              const torch::Device& device) {
  if (jobs.empty())
    return;
  static_assert(sizeof(cuda::copy_job) % sizeof(std::int64_t) == 0);
  auto words = static_cast<int64_t>(jobs.size() * sizeof(cuda::copy_job) / sizeof(std::int64_t));
  auto host = torch::from_blob(const_cast<cuda::copy_job*>(jobs.data()), {words}, torch::kInt64);
  auto dev = host.to(device, /*non_blocking=*/false, /*copy=*/true);
  cuda::batched_copy(static_cast<const cuda::copy_job*>(dev.data_ptr()), jobs.size(), max_bytes,
                     current_stream(device));
}

} // namespace

void* current_stream(const torch::Device& device) {
  return c10::cuda::getCurrentCUDAStream(device.index()).stream();
}

void cuda_flatten(bucket& b, const std::vector<torch::Tensor>& grads) {
  c10::cuda::CUDAGuard guard(b.layout.device);
  auto elem = b.flat.element_size();
  auto* base = static_cast<char*>(b.flat.data_ptr());
  std::vector<cuda::copy_job> jobs;
  std::size_t max_bytes = 0;
  for (const auto& s : b.layout.slots) {
    auto bytes = static_cast<std::size_t>(s.numel) * elem;
    if (bytes == 0)
      continue;
    jobs.push_back({grads[s.tensor_index].data_ptr(), base + s.offset * elem, bytes});
    max_bytes = std::max(max_bytes, bytes);
  }
  run_jobs(jobs, max_bytes, b.layout.device);
}

void cuda_unflatten(const bucket& b, std::vector<torch::Tensor>& grads) {
  c10::cuda::CUDAGuard guard(b.layout.device);
  auto elem = b.flat.element_size();
  const auto* base = static_cast<const char*>(b.flat.data_ptr());
  std::vector<cuda::copy_job> jobs;
  std::size_t max_bytes = 0;
  for (const auto& s : b.layout.slots) {
    auto bytes = static_cast<std::size_t>(s.numel) * elem;
    if (bytes == 0)
      continue;
    jobs.push_back({base + s.offset * elem, grads[s.tensor_index].data_ptr(), bytes});
    max_bytes = std::max(max_bytes, bytes);
  }
  run_jobs(jobs, max_bytes, b.layout.device);
}

void cuda_weighted_sum(torch::Tensor& dst, const torch::Tensor& src, double weight) {
  c10::cuda::CUDAGuard guard(dst.device());
  cuda::axpy(dst.data_ptr(), src.data_ptr(), static_cast<std::size_t>(dst.numel()), weight,
             kind_of(dst.scalar_type()), current_stream(dst.device()));
}

void cuda_scale(torch::Tensor& t, double factor) {
  c10::cuda::CUDAGuard guard(t.device());
  cuda::scale(t.data_ptr(), static_cast<std::size_t>(t.numel()), factor,
              kind_of(t.scalar_type()), current_stream(t.device()));
}

} // namespace asteroid::kernels::detail
