#include "asteroid/data/make_dataset.hpp"

#include "asteroid/data/cifar10.hpp"
#include "asteroid/data/data_error.hpp"
#include "asteroid/data/fashion_mnist.hpp"
#include "asteroid/data/synthetic.hpp"

namespace asteroid::data {

const std::vector<std::string>& known_datasets() {
  static const std::vector<std::string> names{"fashion-mnist", "cifar10", "synthetic-images",
                                              "synthetic-tokens"};
  return names;
}

std::shared_ptr<dataset> make_dataset(const std::string& name, const dataset_options& options) {
  // Train and test of a synthetic set are independent draws from one distribution.
  uint64_t stream = options.split == split::train ? 0 : 1;
  if (name == "fashion-mnist") {
    auto dir = options.path.empty() ? std::string(default_fashion_mnist_dir) : options.path;
    return std::make_shared<tensor_dataset>(
      load_fashion_mnist(dir, options.split, options.normalize));
  }
  if (name == "cifar10")
    return std::make_shared<tensor_dataset>(
      load_cifar10(options.path, options.split, options.normalize));
  if (name == "synthetic-images") {
    synthetic_images_options o;
    o.count = options.count;
    o.shape = options.shape;
    o.num_classes = options.num_classes;
    o.seed = options.seed;
    o.stream = stream;
    if (options.signal >= 0)
      o.signal = options.signal;
    return std::make_shared<tensor_dataset>(make_synthetic_images(o));
  }
  if (name == "synthetic-tokens") {
    synthetic_tokens_options o;
    o.count = options.count;
    o.length = options.length;
    o.vocab = options.vocab;
    o.num_classes = options.num_classes;
    o.seed = options.seed;
    o.stream = stream;
    if (options.signal >= 0)
      o.signal = options.signal;
    return std::make_shared<tensor_dataset>(make_synthetic_tokens(o));
  }
  std::string known;
  for (const auto& n : known_datasets())
    known += (known.empty() ? "" : ", ") + n;
  throw data_error("unknown dataset '" + name + "'; known datasets: " + known);
}

} // namespace asteroid::data
