#include "asteroid/kernels/weighted_sum.hpp"

#ifdef ASTEROID_WITH_CUDA
#include "cuda_ops.hpp"
#endif

#include <stdexcept>
#include <string>

namespace asteroid::kernels {

namespace {

[[maybe_unused]] bool cuda_kernel_dtype(torch::Dtype d) {
  return d == torch::kFloat32 || d == torch::kFloat64 || d == torch::kFloat16
         || d == torch::kBFloat16;
}

void check_floating(const torch::Tensor& t, const char* role) {
  if (!t.defined())
    throw std::invalid_argument(std::string("weighted sum: ") + role + " is undefined");
  if (!torch::isFloatingType(t.scalar_type()))
    throw std::invalid_argument(std::string("weighted sum: ") + role + " has dtype "
                                + c10::toString(t.scalar_type()) + ", need a floating type");
}

} // namespace

void weighted_sum_(torch::Tensor& dst, const torch::Tensor& src, double weight) {
  check_floating(dst, "dst");
  check_floating(src, "src");
  if (dst.sizes() != src.sizes() || dst.scalar_type() != src.scalar_type()
      || dst.device() != src.device())
    throw std::invalid_argument("weighted sum: dst is " + c10::str(dst.sizes()) + " "
                                + c10::toString(dst.scalar_type()) + " on " + dst.device().str()
                                + " but src is " + c10::str(src.sizes()) + " "
                                + c10::toString(src.scalar_type()) + " on "
                                + src.device().str());
  torch::NoGradGuard no_grad;
#ifdef ASTEROID_WITH_CUDA
  if (dst.is_cuda() && dst.is_contiguous() && src.is_contiguous()
      && cuda_kernel_dtype(dst.scalar_type())) {
    detail::cuda_weighted_sum(dst, src, weight);
    return;
  }
#endif
  dst.add_(src, weight);
}

void scale_(torch::Tensor& t, double factor) {
  if (!t.defined() || !torch::isFloatingType(t.scalar_type()))
    throw std::invalid_argument("scale: need a defined floating tensor");
  torch::NoGradGuard no_grad;
#ifdef ASTEROID_WITH_CUDA
  if (t.is_cuda() && t.is_contiguous() && cuda_kernel_dtype(t.scalar_type())) {
    detail::cuda_scale(t, factor);
    return;
  }
#endif
  t.mul_(factor);
}

} // namespace asteroid::kernels
