#include "asteroid/kernels/bucket.hpp"

#ifdef ASTEROID_WITH_CUDA
#include "cuda_ops.hpp"
#endif

#include <stdexcept>
#include <string>

namespace asteroid::kernels {

namespace {

std::string grad_name(std::size_t i) {
  return "grad " + std::to_string(i);
}

void check_slot(const bucket_layout& layout, const bucket_slot& s,
                const std::vector<torch::Tensor>& grads) {
  if (s.tensor_index >= grads.size())
    throw std::invalid_argument("bucket slot refers to " + grad_name(s.tensor_index) + " but only "
                                + std::to_string(grads.size()) + " tensors were given");
  const auto& t = grads[s.tensor_index];
  if (!t.defined())
    throw std::invalid_argument(grad_name(s.tensor_index) + " is undefined");
  if (t.numel() != s.numel)
    throw std::invalid_argument(grad_name(s.tensor_index) + " has " + std::to_string(t.numel())
                                + " elements but its bucket slot has "
                                + std::to_string(s.numel));
  if (t.scalar_type() != layout.dtype || t.device() != layout.device)
    throw std::invalid_argument(grad_name(s.tensor_index) + " is " + c10::toString(t.scalar_type())
                                + " on " + t.device().str() + " but its bucket is "
                                + c10::toString(layout.dtype) + " on " + layout.device.str());
  if (s.offset < 0 || s.offset + s.numel > layout.numel)
    throw std::invalid_argument("bucket slot for " + grad_name(s.tensor_index)
                                + " lies outside its bucket");
}

void check_buffer(const bucket& b) {
  const auto& f = b.flat;
  if (!f.defined() || f.dim() != 1 || !f.is_contiguous() || f.numel() != b.layout.numel
      || f.scalar_type() != b.layout.dtype || f.device() != b.layout.device)
    throw std::invalid_argument("bucket buffer does not match its layout (need a contiguous 1-D "
                                + std::string(c10::toString(b.layout.dtype)) + " tensor of "
                                + std::to_string(b.layout.numel) + " elements on "
                                + b.layout.device.str() + ")");
}

#ifdef ASTEROID_WITH_CUDA
bool all_contiguous(const bucket& b, const std::vector<torch::Tensor>& grads) {
  for (const auto& s : b.layout.slots)
    if (!grads[s.tensor_index].is_contiguous())
      return false;
  return true;
}
#endif

} // namespace

std::vector<bucket_layout> plan_buckets(const std::vector<torch::Tensor>& grads,
                                        std::int64_t bucket_bytes) {
  if (bucket_bytes <= 0)
    throw std::invalid_argument("bucket size must be positive, got "
                                + std::to_string(bucket_bytes) + " bytes");
  std::vector<bucket_layout> out;
  std::int64_t used_bytes = 0;
  for (std::size_t i = 0; i < grads.size(); ++i) {
    const auto& t = grads[i];
    if (!t.defined())
      throw std::invalid_argument(grad_name(i) + " is undefined");
    auto bytes = t.numel() * static_cast<std::int64_t>(t.element_size());
    bool fits = !out.empty() && out.back().dtype == t.scalar_type()
                && out.back().device == t.device() && used_bytes + bytes <= bucket_bytes;
    // An empty bucket always takes the tensor, however large.
    if (!fits) {
      bucket_layout l;
      l.dtype = t.scalar_type();
      l.device = t.device();
      out.push_back(std::move(l));
      used_bytes = 0;
    }
    auto& l = out.back();
    l.slots.push_back({i, l.numel, t.numel()});
    l.numel += t.numel();
    used_bytes += bytes;
  }
  return out;
}

void flatten_into(bucket& b, const std::vector<torch::Tensor>& grads) {
  check_buffer(b);
  for (const auto& s : b.layout.slots)
    check_slot(b.layout, s, grads);
#ifdef ASTEROID_WITH_CUDA
  if (b.layout.device.is_cuda() && all_contiguous(b, grads)) {
    detail::cuda_flatten(b, grads);
    return;
  }
#endif
  torch::NoGradGuard no_grad;
  for (const auto& s : b.layout.slots) {
    const auto& t = grads[s.tensor_index];
    b.flat.narrow(0, s.offset, s.numel).view(t.sizes()).copy_(t);
  }
}

std::vector<bucket> flatten_into_buckets(const std::vector<torch::Tensor>& grads,
                                         std::int64_t bucket_bytes) {
  std::vector<bucket> out;
  for (auto& layout : plan_buckets(grads, bucket_bytes)) {
    bucket b;
    b.flat = torch::empty({layout.numel},
                          torch::TensorOptions().dtype(layout.dtype).device(layout.device));
    b.layout = std::move(layout);
    flatten_into(b, grads);
    out.push_back(std::move(b));
  }
  return out;
}

bool aliases(const bucket& b, const std::vector<torch::Tensor>& grads) {
  if (!b.flat.defined() || b.layout.slots.size() != grads.size())
    return false;
  const auto element = static_cast<std::int64_t>(b.flat.element_size());
  const auto* base = static_cast<const char*>(b.flat.data_ptr());
  for (const auto& s : b.layout.slots) {
    if (s.tensor_index >= grads.size())
      return false;
    const auto& t = grads[s.tensor_index];
    if (!t.defined() || t.numel() != s.numel || t.scalar_type() != b.layout.dtype
        || t.device() != b.layout.device || !t.is_contiguous())
      return false;
    // An empty tensor has no storage to share.
    if (s.numel > 0 && static_cast<const char*>(t.data_ptr()) != base + s.offset * element)
      return false;
  }
  return true;
}

std::vector<torch::Tensor> slot_views(const bucket& b, const std::vector<torch::Tensor>& like) {
  check_buffer(b);
  for (const auto& s : b.layout.slots)
    check_slot(b.layout, s, like);
  std::vector<torch::Tensor> out(like.size());
  for (const auto& s : b.layout.slots)
    out[s.tensor_index] = b.flat.narrow(0, s.offset, s.numel).view(like[s.tensor_index].sizes());
  return out;
}

void unflatten_from_buckets(const std::vector<bucket>& buckets,
                            std::vector<torch::Tensor>& grads) {
  // Check everything first: a mismatch must not leave grads half-written.
  for (const auto& b : buckets) {
    check_buffer(b);
    for (const auto& s : b.layout.slots)
      check_slot(b.layout, s, grads);
  }
  torch::NoGradGuard no_grad;
  for (const auto& b : buckets) {
#ifdef ASTEROID_WITH_CUDA
    if (b.layout.device.is_cuda() && all_contiguous(b, grads)) {
      detail::cuda_unflatten(b, grads);
      continue;
    }
#endif
    for (const auto& s : b.layout.slots) {
      auto& t = grads[s.tensor_index];
      t.copy_(b.flat.narrow(0, s.offset, s.numel).view(t.sizes()));
    }
  }
}

} // namespace asteroid::kernels
