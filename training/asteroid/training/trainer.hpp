#pragma once

#include "asteroid/data/dataset.hpp"
#include "asteroid/models/sequential_model.hpp"
#include "asteroid/training/evaluate.hpp"
#include "asteroid/training/trainer_options.hpp"

#include <functional>
#include <memory>

namespace asteroid::training {

/// What a finished (or stopped) run reports.
struct train_result {
  /// Optimizer steps taken in total, including those before a resume.
  int64_t steps = 0;
  /// Completed epochs.
  int64_t epochs = 0;
  /// Mean training loss over the steps of this run's last epoch.
  double train_loss = 0.0;
  /// Test-split result after the last completed epoch (samples == 0 if none).
  eval_result test;
  /// Wall time of the training loop in this run, and its throughput.
  double seconds = 0.0;
  double samples_per_s = 0.0;
};

/// Single-device training: the reference every distributed run must match.
///
/// Determinism: the model is initialised from `seed`, the data order of epoch
/// e is `data::epoch_order(n, seed, e)`, and dropout draws from LibTorch's
/// global generator, whose state goes into every checkpoint. So a run resumed
/// from a checkpoint continues to the same weights as an uninterrupted one.
class trainer {
public:
  /// Loads the datasets and builds the model and optimizer, or restores them
  /// from `options.resume_from`. Throws on bad options, files or checkpoints
  /// with a message naming the problem.
  explicit trainer(trainer_options options);
  ~trainer();

  /// Trains until `epochs` are done or `max_steps` steps were taken.
  train_result run();

  models::sequential_model& model() { return model_; }
  const trainer_options& options() const { return options_; }
  int64_t step() const { return step_; }

  /// Writes a checkpoint of the current state to `path`.
  void save(const std::string& path) const;

private:
  void restore(const std::string& path);
  int64_t train_size() const;

  trainer_options options_;
  std::shared_ptr<data::dataset> train_set_;
  std::shared_ptr<data::dataset> test_set_;
  models::sequential_model model_{nullptr};
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  int64_t step_ = 0;
  int64_t epoch_ = 0;
  /// Batches of epoch_ already consumed.
  int64_t batch_in_epoch_ = 0;
};

} // namespace asteroid::training
