#pragma once

/// \file
/// Gradient buckets: many small gradients packed into a few flat buffers so
/// that an all-reduce sends a few large messages instead of many tiny ones.

#include <torch/torch.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace asteroid::kernels {

/// Where one gradient lives inside a bucket's flat buffer.
struct bucket_slot {
  std::size_t tensor_index = 0; ///< position in the list given to plan_buckets()
  std::int64_t offset = 0;      ///< first element inside the flat buffer
  std::int64_t numel = 0;
};

/// Layout of one bucket: the gradients it holds, all of one dtype and device.
struct bucket_layout {
  torch::Dtype dtype = torch::kFloat32;
  torch::Device device = torch::kCPU;
  std::int64_t numel = 0; ///< total elements (sum of slot sizes, no padding)
  std::vector<bucket_slot> slots;
};

/// A filled bucket: its layout and a 1-D contiguous buffer of layout.numel.
struct bucket {
  bucket_layout layout;
  torch::Tensor flat;
};

/// Groups `grads` into buckets of at most `bucket_bytes` bytes each.
///
/// Tensors keep their order; a bucket closes when the next tensor would
/// overflow it or has another dtype or device. A tensor larger than
/// `bucket_bytes` gets a bucket of its own (tensors are never split, so every
/// all-reduce message covers whole gradients). Every peer that plans the same
/// list of shapes gets the same layout. Throws std::invalid_argument for
/// `bucket_bytes <= 0` or an undefined tensor (naming its index).
std::vector<bucket_layout> plan_buckets(const std::vector<torch::Tensor>& grads,
                                        std::int64_t bucket_bytes);

/// Copies `grads` into a freshly allocated bucket per planned layout.
std::vector<bucket> flatten_into_buckets(const std::vector<torch::Tensor>& grads,
                                         std::int64_t bucket_bytes);

/// Copies `grads` into an existing bucket (reusing its buffer across steps).
///
/// Throws std::invalid_argument when `grads` does not match the layout.
void flatten_into(bucket& b, const std::vector<torch::Tensor>& grads);

/// Whether every slot's tensor in `grads` is the view `slot_views` made of
/// `b.flat`: same storage at the slot's offset, same element count, dtype,
/// device, contiguous. Then the flat buffer already holds the gradients and
/// flattening them would copy them onto themselves.
bool aliases(const bucket& b, const std::vector<torch::Tensor>& grads);

/// One view of `b.flat` per slot, shaped like the slot's tensor in `like`
/// (indexed as `like`; tensors of `like` in no slot stay undefined). A
/// parameter whose gradient is such a view has autograd accumulate into the
/// bucket directly (in place, as it does into a defined gradient), so the
/// next all-reduce needs no copy. Throws std::invalid_argument like
/// unflatten_from_buckets when a slot does not match `like`.
std::vector<torch::Tensor> slot_views(const bucket& b, const std::vector<torch::Tensor>& like);

/// Writes every slot of every bucket back into `grads`, in place.
///
/// Works for non-contiguous destinations. Throws std::invalid_argument naming
/// the tensor when a slot's index, element count, dtype or device does not
/// match `grads`.
void unflatten_from_buckets(const std::vector<bucket>& buckets,
                            std::vector<torch::Tensor>& grads);

} // namespace asteroid::kernels
