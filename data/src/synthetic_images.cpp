#include <ATen/CPUGeneratorImpl.h>

#include "asteroid/data/data_error.hpp"
#include "asteroid/data/synthetic.hpp"
#include "random.hpp"

namespace asteroid::data {

namespace {

// Prototypes come from their own stream so that train and test streams share the classes.
constexpr uint64_t prototype_stream = ~uint64_t{0};

} // namespace

tensor_dataset make_synthetic_images(const synthetic_images_options& options) {
  if (options.count < 1)
    throw data_error("synthetic-images: count must be positive, got " +
                     std::to_string(options.count));
  if (options.num_classes < 1)
    throw data_error("synthetic-images: num_classes must be positive, got " +
                     std::to_string(options.num_classes));
  if (options.shape.empty())
    throw data_error("synthetic-images: empty sample shape");
  for (auto d : options.shape)
    if (d < 1)
      throw data_error("synthetic-images: sample shape has non-positive dimension " +
                       std::to_string(d));
  // Local generators: the global RNG (model init, dropout) must not see these draws.
  auto prototype_gen =
    at::make_generator<at::CPUGeneratorImpl>(detail::derive_seed(options.seed, prototype_stream));
  auto sample_gen =
    at::make_generator<at::CPUGeneratorImpl>(detail::derive_seed(options.seed, options.stream));
  std::vector<int64_t> prototype_shape{options.num_classes};
  prototype_shape.insert(prototype_shape.end(), options.shape.begin(), options.shape.end());
  std::vector<int64_t> input_shape{options.count};
  input_shape.insert(input_shape.end(), options.shape.begin(), options.shape.end());
  auto prototypes = torch::randn(prototype_shape, prototype_gen, torch::kFloat32);
  auto targets = torch::randint(0, options.num_classes, {options.count}, sample_gen, torch::kInt64);
  auto inputs = torch::randn(input_shape, sample_gen, torch::kFloat32);
  inputs.add_(prototypes.index_select(0, targets), options.signal);
  return tensor_dataset(std::move(inputs), std::move(targets), options.num_classes,
                        "synthetic-images");
}

} // namespace asteroid::data
