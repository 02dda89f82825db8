#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "asteroid/data/dataset.hpp"
#include "asteroid/data/split.hpp"

namespace asteroid::data {

/// Options of make_dataset; each dataset reads the fields it needs.
struct dataset_options {
  /// Folder with the files: fashion-mnist (default default_fashion_mnist_dir) and cifar10
  /// (required).
  std::string path;
  /// Which split; the synthetic sets draw train and test as independent streams.
  data::split split = data::split::train;
  /// Real images: normalise with the dataset's mean/std (otherwise only scale to [0, 1]).
  bool normalize = true;
  // Synthetic sets.
  int64_t count = 1024;
  std::vector<int64_t> shape{1, 28, 28}; ///< synthetic-images
  int64_t num_classes = 10;
  uint64_t seed = 0;
  double signal = -1; ///< negative: the generator's default
  int64_t vocab = 1000; ///< synthetic-tokens
  int64_t length = 32;  ///< synthetic-tokens
};

/// Names make_dataset knows: fashion-mnist, cifar10, synthetic-images, synthetic-tokens.
const std::vector<std::string>& known_datasets();

/// Creates a dataset by name. Throws data_error listing known_datasets() for an unknown name, and
/// whatever the loader throws for bad files.
std::shared_ptr<dataset> make_dataset(const std::string& name, const dataset_options& options = {});

} // namespace asteroid::data
