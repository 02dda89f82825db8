#pragma once

#include <string>

#include "asteroid/data/dataset.hpp"
#include "asteroid/data/split.hpp"

namespace asteroid::data {

/// Mean of all Fashion-MNIST training pixels, scaled to [0, 1].
inline constexpr double fashion_mnist_mean = 0.2860;
/// Standard deviation of all Fashion-MNIST training pixels, scaled to [0, 1].
inline constexpr double fashion_mnist_std = 0.3530;
/// Number of Fashion-MNIST classes.
inline constexpr int64_t fashion_mnist_classes = 10;

/// Where Debian's `dataset-fashion-mnist` package installs the files.
inline constexpr const char* default_fashion_mnist_dir = "/usr/share/datasets/fashion-mnist";

/// Loads a Fashion-MNIST split from `dir`.
///
/// Reads `train-images-idx3-ubyte` / `train-labels-idx1-ubyte` (or the `t10k-` pair for
/// split::test), preferring the uncompressed files when present and falling back to the `.gz`
/// ones. Inputs are float32 [N, 1, 28, 28]: pixel / 255, then, if `normalize`,
/// (x - fashion_mnist_mean) / fashion_mnist_std (so values lie in about [-0.81, 2.02]).
/// Targets are int64 in [0, 10). Throws data_error naming the file and the problem for a missing
/// or malformed file, images that are not 28x28, a label >= 10, or image and label counts that
/// disagree.
tensor_dataset load_fashion_mnist(const std::string& dir, split which, bool normalize = true);

} // namespace asteroid::data
