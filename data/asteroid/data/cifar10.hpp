#pragma once

#include <array>
#include <string>
#include <vector>

#include "asteroid/data/dataset.hpp"
#include "asteroid/data/split.hpp"

namespace asteroid::data {

/// Per-channel (R, G, B) means of the CIFAR-10 training pixels, scaled to [0, 1].
inline constexpr std::array<double, 3> cifar10_mean{0.4914, 0.4822, 0.4465};
/// Per-channel (R, G, B) standard deviations of the CIFAR-10 training pixels, scaled to [0, 1].
inline constexpr std::array<double, 3> cifar10_std{0.2470, 0.2435, 0.2616};
/// Number of CIFAR-10 classes.
inline constexpr int64_t cifar10_classes = 10;
/// Bytes per record of the binary version: 1 label byte + 3 x 32 x 32 pixel bytes.
inline constexpr int64_t cifar10_record_bytes = 1 + 3 * 32 * 32;

/// The raw contents of CIFAR-10 binary batch files.
struct cifar10_records {
  torch::Tensor images; ///< uint8 [N, 3, 32, 32], channel-major as stored in the file
  torch::Tensor labels; ///< int64 [N]
};

/// File names of a split: data_batch_1.bin .. data_batch_5.bin, or test_batch.bin.
std::vector<std::string> cifar10_file_names(split which);

/// Reads one binary batch file (gzipped or not). Throws data_error naming `path` if it is missing,
/// empty, not a multiple of cifar10_record_bytes long, or holds a label >= 10.
cifar10_records read_cifar10_file(const std::string& path);

/// Loads a CIFAR-10 split from the binary batch files in `dir`.
///
/// Inputs are float32 [N, 3, 32, 32]: pixel / 255, then, if `normalize`,
/// (x - cifar10_mean[c]) / cifar10_std[c] per channel c. Targets are int64 in [0, 10).
tensor_dataset load_cifar10(const std::string& dir, split which, bool normalize = true);

} // namespace asteroid::data
