#pragma once

#include <cstdint>
#include <vector>

#include <torch/torch.h>

#include "asteroid/data/sample_range.hpp"

namespace asteroid::data {

/// One sample: an input tensor (e.g. [C,H,W] float32 or [L] int64) and a scalar int64 target.
struct example {
  torch::Tensor input;
  torch::Tensor target;
};

/// A batch of samples: `inputs` is [B, sample_shape...], `targets` is [B] int64.
struct batch {
  torch::Tensor inputs;
  torch::Tensor targets;

  /// Number of samples in the batch (0 for an empty batch).
  int64_t size() const { return targets.defined() ? targets.size(0) : 0; }
};

/// Samples [range.begin, range.end) of `b`, sharing memory with it.
/// Throws std::out_of_range if the range does not lie inside the batch.
batch slice(const batch& b, sample_range range);

/// Splits `b` into consecutive parts of the given sizes (e.g. {3, 5} of a batch of 8), each
/// sharing memory with `b`. Shares must be non-negative and sum to b.size().
std::vector<batch> split_batch(const batch& b, const std::vector<int64_t>& shares);

/// Concatenates batches along the sample dimension (the inverse of split_batch).
/// Throws std::invalid_argument for an empty list.
batch concat(const std::vector<batch>& parts);

} // namespace asteroid::data
