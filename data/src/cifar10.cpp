#include "asteroid/data/cifar10.hpp"

#include <filesystem>

#include "asteroid/data/data_error.hpp"
#include "pixels.hpp"
#include "read_bytes.hpp"

namespace asteroid::data {

std::vector<std::string> cifar10_file_names(split which) {
  if (which == split::test)
    return {"test_batch.bin"};
  return {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin",
          "data_batch_5.bin"};
}

cifar10_records read_cifar10_file(const std::string& path) {
  auto bytes = detail::read_bytes(path);
  auto size = static_cast<int64_t>(bytes.size);
  if (size == 0)
    throw data_error(path + ": empty file, expected CIFAR-10 records of " +
                     std::to_string(cifar10_record_bytes) + " bytes");
  if (size % cifar10_record_bytes != 0)
    throw data_error(path + ": size " + std::to_string(size) + " is not a multiple of the " +
                     std::to_string(cifar10_record_bytes) +
                     "-byte CIFAR-10 record (truncated or not a CIFAR-10 binary batch)");
  int64_t count = size / cifar10_record_bytes;
  auto records = torch::from_blob(bytes.data.get(), {count, cifar10_record_bytes}, torch::kUInt8);
  auto labels = records.select(1, 0).to(torch::kInt64);
  auto bad = (labels >= cifar10_classes).nonzero();
  if (bad.numel() > 0) {
    int64_t at = bad[0].item<int64_t>();
    throw data_error(path + ": record " + std::to_string(at) + " has label " +
                     std::to_string(labels[at].item<int64_t>()) + ", out of range [0, 10)");
  }
  // clone(): `bytes` dies with this function.
  auto images = records.narrow(1, 1, cifar10_record_bytes - 1).reshape({count, 3, 32, 32}).clone();
  return {images, labels};
}

tensor_dataset load_cifar10(const std::string& dir, split which, bool normalize) {
  if (dir.empty())
    throw data_error("cifar10: no folder given (expected the binary batch files "
                     "data_batch_1.bin .. data_batch_5.bin, test_batch.bin)");
  std::vector<torch::Tensor> images;
  std::vector<torch::Tensor> labels;
  for (const auto& name : cifar10_file_names(which)) {
    auto records = read_cifar10_file((std::filesystem::path(dir) / name).string());
    images.push_back(records.images);
    labels.push_back(records.labels);
  }
  std::vector<double> mean{0, 0, 0};
  std::vector<double> stdev{1, 1, 1};
  if (normalize) {
    mean.assign(cifar10_mean.begin(), cifar10_mean.end());
    stdev.assign(cifar10_std.begin(), cifar10_std.end());
  }
  auto inputs = detail::bytes_to_float(torch::cat(images), mean, stdev);
  return tensor_dataset(std::move(inputs), torch::cat(labels), cifar10_classes,
                        std::string("cifar10/") + to_string(which));
}

} // namespace asteroid::data
