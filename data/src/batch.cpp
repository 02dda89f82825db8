#include "asteroid/data/batch.hpp"

#include <stdexcept>
#include <string>

namespace asteroid::data {

batch slice(const batch& b, sample_range range) {
  if (range.begin < 0 || range.end < range.begin || range.end > b.size())
    throw std::out_of_range("slice: range [" + std::to_string(range.begin) + ", " +
                            std::to_string(range.end) + ") is not inside a batch of " +
                            std::to_string(b.size()));
  return {b.inputs.narrow(0, range.begin, range.size()),
          b.targets.narrow(0, range.begin, range.size())};
}

std::vector<batch> split_batch(const batch& b, const std::vector<int64_t>& shares) {
  std::vector<batch> parts;
  for (auto r : split_by_shares({0, b.size()}, shares))
    parts.push_back(slice(b, r));
  return parts;
}

batch concat(const std::vector<batch>& parts) {
  if (parts.empty())
    throw std::invalid_argument("concat: no batches");
  std::vector<torch::Tensor> inputs;
  std::vector<torch::Tensor> targets;
  for (const auto& p : parts) {
    inputs.push_back(p.inputs);
    targets.push_back(p.targets);
  }
  return {torch::cat(inputs), torch::cat(targets)};
}

} // namespace asteroid::data
