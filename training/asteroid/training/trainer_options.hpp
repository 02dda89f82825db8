#pragma once

#include "asteroid/models/model_options.hpp"

#include <cstdint>
#include <string>

namespace asteroid::training {

/// Which optimizer a trainer builds.
enum class optimizer_kind { sgd, adam };

/// Parses "sgd" or "adam"; throws std::invalid_argument naming the value.
optimizer_kind parse_optimizer(const std::string& name);

/// "sgd" or "adam".
const char* to_string(optimizer_kind kind);

/// Hyper-parameters of the optimizer.
struct optimizer_options {
  optimizer_kind kind = optimizer_kind::sgd;
  double lr = 0.01;
  /// SGD momentum (ignored by Adam).
  double momentum = 0.9;
  double weight_decay = 0.0;
};

/// Everything a single-device training run needs.
///
/// Defaults train the small CNN on Fashion-MNIST, the configuration the README
/// uses; `max_steps`, `train_limit` and `test_limit` exist so tests can run a
/// few steps on a slice of the data.
struct trainer_options {
  std::string model = "cnn";
  /// Model options; classes, channels and image size are taken from the
  /// dataset unless `keep_model_shape` is set.
  models::model_options model_options;
  bool keep_model_shape = false;

  /// Dataset name for data::make_dataset, and its folder (empty: default).
  std::string dataset = "fashion-mnist";
  std::string data_dir;
  /// Use only the first N training / test samples (0: all).
  int64_t train_limit = 0;
  int64_t test_limit = 0;

  int64_t batch_size = 64;
  int64_t epochs = 2;
  optimizer_options optimizer;
  /// Seeds model initialisation, data order and dropout.
  uint64_t seed = 1;
  /// LibTorch intra-op threads (0: LibTorch's default).
  int threads = 0;

  /// Stop after this many optimizer steps in total (-1: run all epochs).
  int64_t max_steps = -1;

  /// Write a checkpoint here (empty: never) every `checkpoint_every` steps
  /// (0: at the end of each epoch) and when training ends.
  std::string checkpoint_path;
  int64_t checkpoint_every = 0;
  /// Resume from this checkpoint (empty: start fresh).
  std::string resume_from;

  /// Evaluate on the test split after each epoch.
  bool evaluate = true;
  int64_t eval_batch_size = 500;

  /// JSON-lines metrics: a file path, "-" for stdout, empty for none.
  std::string metrics_path;
  /// Emit a step metric every N steps.
  int64_t log_every = 50;
  /// Live progress line on stderr: -1 auto (only on a terminal), 0 off, 1 on.
  int progress = -1;
};

} // namespace asteroid::training
