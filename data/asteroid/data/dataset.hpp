#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "asteroid/data/batch.hpp"

namespace asteroid::data {

/// A finite, random-access classification dataset.
///
/// Implementations keep the whole set in memory so that a trainer can gather any list of indices
/// into a batch with one `index_select`.
class dataset {
public:
  virtual ~dataset() = default;

  /// Number of samples.
  virtual int64_t size() const = 0;

  /// Gathers the samples at `indices` (in that order, repeats allowed) into one batch.
  /// Throws std::out_of_range naming the first bad index.
  virtual batch get_batch(const std::vector<int64_t>& indices) const = 0;

  /// Samples [begin, end) as a batch; may share memory with the dataset (no copy).
  virtual batch get_range(int64_t begin, int64_t end) const = 0;

  /// Shape of one input, without the batch dimension (e.g. {1, 28, 28}).
  virtual std::vector<int64_t> sample_shape() const = 0;

  /// Number of target classes; targets lie in [0, num_classes()).
  virtual int64_t num_classes() const = 0;

  /// A short human-readable name, e.g. "fashion-mnist/train".
  virtual std::string name() const = 0;

  /// Sample `i` (a view, no copy). Throws std::out_of_range for a bad index.
  virtual example get(int64_t i) const;
};

/// A dataset stored as two tensors: `inputs` [N, ...] and `targets` [N] int64.
///
/// Every loader in this component returns one of these.
class tensor_dataset : public dataset {
public:
  /// Takes ownership of the tensors; checks that the first dimensions agree, that targets are a
  /// 1-D int64 tensor and that every target lies in [0, num_classes). Throws data_error naming
  /// `name` otherwise.
  tensor_dataset(torch::Tensor inputs, torch::Tensor targets, int64_t num_classes,
                 std::string name);

  int64_t size() const override;
  batch get_batch(const std::vector<int64_t>& indices) const override;
  batch get_range(int64_t begin, int64_t end) const override;
  std::vector<int64_t> sample_shape() const override;
  int64_t num_classes() const override;
  std::string name() const override;
  example get(int64_t i) const override;

  /// All inputs, [N, ...].
  const torch::Tensor& inputs() const { return inputs_; }

  /// All targets, [N] int64.
  const torch::Tensor& targets() const { return targets_; }

private:
  torch::Tensor inputs_;
  torch::Tensor targets_;
  int64_t num_classes_;
  std::string name_;
};

} // namespace asteroid::data
