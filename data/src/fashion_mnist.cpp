#include "asteroid/data/fashion_mnist.hpp"

#include <filesystem>

#include "asteroid/data/data_error.hpp"
#include "asteroid/data/idx.hpp"
#include "pixels.hpp"

namespace asteroid::data {

namespace {

// The uncompressed file is cheaper to read, so it wins when both exist.
std::string find_file(const std::string& dir, const std::string& base) {
  auto plain = (std::filesystem::path(dir) / base).string();
  auto gz = plain + ".gz";
  std::error_code ec;
  if (std::filesystem::is_regular_file(plain, ec))
    return plain;
  if (std::filesystem::exists(gz, ec))
    return gz;
  throw data_error(gz + ": no such file (nor uncompressed " + plain + ")");
}

} // namespace

tensor_dataset load_fashion_mnist(const std::string& dir, split which, bool normalize) {
  std::string prefix = which == split::train ? "train" : "t10k";
  auto images_path = find_file(dir, prefix + "-images-idx3-ubyte");
  auto labels_path = find_file(dir, prefix + "-labels-idx1-ubyte");
  auto images = read_idx_images(images_path);
  auto labels = read_idx_labels(labels_path);
  if (images.size(1) != 28 || images.size(2) != 28)
    throw data_error(images_path + ": images are " + std::to_string(images.size(1)) + "x" +
                     std::to_string(images.size(2)) + ", expected 28x28 (Fashion-MNIST)");
  if (images.size(0) != labels.size(0))
    throw data_error(images_path + " has " + std::to_string(images.size(0)) + " images but " +
                     labels_path + " has " + std::to_string(labels.size(0)) +
                     " labels: counts must agree");
  if (labels.numel() > 0) {
    auto bad = (labels >= fashion_mnist_classes).nonzero();
    if (bad.numel() > 0) {
      int64_t at = bad[0].item<int64_t>();
      throw data_error(labels_path + ": label " + std::to_string(labels[at].item<int64_t>()) +
                       " at index " + std::to_string(at) + " is out of range [0, 10)");
    }
  }
  auto inputs = normalize ? detail::bytes_to_float(images.unsqueeze(1), {fashion_mnist_mean},
                                                    {fashion_mnist_std})
                          : detail::bytes_to_float(images.unsqueeze(1), {0.0}, {1.0});
  return tensor_dataset(std::move(inputs), std::move(labels), fashion_mnist_classes,
                        std::string("fashion-mnist/") + to_string(which));
}

} // namespace asteroid::data
