#include "asteroid/data/dataset.hpp"

#include <stdexcept>

#include "asteroid/data/data_error.hpp"

namespace asteroid::data {

example dataset::get(int64_t i) const {
  auto b = get_batch({i});
  return {b.inputs[0], b.targets[0]};
}

tensor_dataset::tensor_dataset(torch::Tensor inputs, torch::Tensor targets, int64_t num_classes,
                               std::string name)
  : inputs_(std::move(inputs)),
    targets_(std::move(targets)),
    num_classes_(num_classes),
    name_(std::move(name)) {
  if (!inputs_.defined() || !targets_.defined())
    throw data_error(name_ + ": undefined inputs or targets tensor");
  if (inputs_.dim() < 1)
    throw data_error(name_ + ": inputs must have a sample dimension");
  if (targets_.dim() != 1 || targets_.scalar_type() != torch::kInt64)
    throw data_error(name_ + ": targets must be a 1-D int64 tensor");
  if (inputs_.size(0) != targets_.size(0))
    throw data_error(name_ + ": " + std::to_string(inputs_.size(0)) + " inputs but " +
                     std::to_string(targets_.size(0)) + " targets");
  if (num_classes_ < 1)
    throw data_error(name_ + ": num_classes must be positive, got " +
                     std::to_string(num_classes_));
  if (targets_.numel() > 0) {
    auto lo = targets_.min().item<int64_t>();
    auto hi = targets_.max().item<int64_t>();
    if (lo < 0 || hi >= num_classes_)
      throw data_error(name_ + ": targets span [" + std::to_string(lo) + ", " +
                       std::to_string(hi) + "], outside [0, " + std::to_string(num_classes_) +
                       ")");
  }
  // index_select and narrow views are cheapest on contiguous storage.
  inputs_ = inputs_.contiguous();
  targets_ = targets_.contiguous();
}

int64_t tensor_dataset::size() const {
  return targets_.size(0);
}

batch tensor_dataset::get_batch(const std::vector<int64_t>& indices) const {
  int64_t n = size();
  for (size_t k = 0; k < indices.size(); ++k)
    if (indices[k] < 0 || indices[k] >= n)
      throw std::out_of_range(name_ + ": index " + std::to_string(indices[k]) + " (position " +
                              std::to_string(k) + " of the batch) is outside [0, " +
                              std::to_string(n) + ")");
  // from_blob does not copy; index_select copies the selected rows out.
  auto index = torch::from_blob(const_cast<int64_t*>(indices.data()),
                                {static_cast<int64_t>(indices.size())}, torch::kInt64);
  return {inputs_.index_select(0, index), targets_.index_select(0, index)};
}

batch tensor_dataset::get_range(int64_t begin, int64_t end) const {
  if (begin < 0 || end < begin || end > size())
    throw std::out_of_range(name_ + ": range [" + std::to_string(begin) + ", " +
                            std::to_string(end) + ") is not inside [0, " +
                            std::to_string(size()) + ")");
  return {inputs_.narrow(0, begin, end - begin), targets_.narrow(0, begin, end - begin)};
}

std::vector<int64_t> tensor_dataset::sample_shape() const {
  auto sizes = inputs_.sizes();
  return {sizes.begin() + 1, sizes.end()};
}

int64_t tensor_dataset::num_classes() const {
  return num_classes_;
}

std::string tensor_dataset::name() const {
  return name_;
}

example tensor_dataset::get(int64_t i) const {
  if (i < 0 || i >= size())
    throw std::out_of_range(name_ + ": index " + std::to_string(i) + " is outside [0, " +
                            std::to_string(size()) + ")");
  return {inputs_[i], targets_[i]};
}

} // namespace asteroid::data
