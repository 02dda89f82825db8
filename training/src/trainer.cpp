#include "asteroid/training/trainer.hpp"
#include "asteroid/kernels/cpu_threads.hpp"

#include "asteroid/data/make_dataset.hpp"
#include "asteroid/data/sampler.hpp"
#include "asteroid/models/zoo.hpp"
#include "asteroid/serialization/checkpoint.hpp"
#include "asteroid/serialization/rng_state.hpp"
#include "asteroid/training/metrics_sink.hpp"
#include "asteroid/training/model_options_json.hpp"
#include "asteroid/training/optimizer.hpp"
#include "asteroid/training/progress_line.hpp"
#include "monotonic_seconds.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <stdexcept>

namespace asteroid::training {

namespace {

// Fills in what the dataset determines unless the user pinned the shape.
void fit_model_to_data(models::model_options& m, const data::dataset& set,
                       const data::dataset_options& d) {
  auto shape = set.sample_shape();
  m.num_classes(set.num_classes());
  if (shape.size() == 3) {
    m.in_channels(shape[0]);
    m.image_size(shape[1]);
  } else if (shape.size() == 1) {
    m.seq_len(shape[0]);
    m.vocab_size(d.vocab);
  }
}

nlohmann::json run_metadata(const trainer_options& o) {
  return {{"dataset", o.dataset},
          {"batch_size", o.batch_size},
          {"seed", o.seed},
          {"optimizer", to_string(o.optimizer.kind)},
          {"train_limit", o.train_limit}};
}

} // namespace

trainer::trainer(trainer_options options) : options_(std::move(options)) {
  if (options_.batch_size <= 0)
    throw std::invalid_argument("batch size must be positive, got "
                                + std::to_string(options_.batch_size));
  if (options_.epochs <= 0)
    throw std::invalid_argument("epochs must be positive, got "
                                + std::to_string(options_.epochs));
  if (options_.threads > 0)
    kernels::set_cpu_threads(options_.threads);

  data::dataset_options d;
  d.path = options_.data_dir;
  d.seed = options_.seed;
  d.split = data::split::train;
  train_set_ = data::make_dataset(options_.dataset, d);
  auto samples = std::max<int64_t>(1, train_size());
  if (options_.epochs > std::numeric_limits<int64_t>::max() / samples)
    throw std::invalid_argument("epochs (" + std::to_string(options_.epochs) + ") x "
                                + std::to_string(samples)
                                + " samples does not fit a 64-bit sample count");
  if (options_.evaluate) {
    d.split = data::split::test;
    test_set_ = data::make_dataset(options_.dataset, d);
  }

  if (!options_.keep_model_shape)
    fit_model_to_data(options_.model_options, *train_set_, d);
  options_.model_options.seed(static_cast<int64_t>(options_.seed));
  model_ = models::make_model(options_.model, options_.model_options);
  model_->train();
  optimizer_ = make_optimizer(options_.optimizer, model_->parameters());

  if (!options_.resume_from.empty())
    restore(options_.resume_from);
}

trainer::~trainer() = default;

int64_t trainer::train_size() const {
  auto n = train_set_->size();
  return options_.train_limit > 0 ? std::min(n, options_.train_limit) : n;
}

void trainer::save(const std::string& path) const {
  serialization::checkpoint ck;
  ck.model_name = options_.model;
  ck.model_options_json = to_json(options_.model_options).dump();
  ck.model_state = model_->range_state(0, -1);
  ck.optimizer = serialization::capture_optimizer_state(*optimizer_);
  ck.step = step_;
  ck.epoch = epoch_;
  ck.data_position = batch_in_epoch_ * options_.batch_size;
  ck.rng_state = serialization::capture_rng_state();
  ck.metadata = run_metadata(options_).dump();
  serialization::save_checkpoint(path, ck);
}

void trainer::restore(const std::string& path) {
  auto ck = serialization::load_checkpoint(path);
  auto fail = [&](const std::string& what) {
    throw std::invalid_argument("cannot resume from '" + path + "': " + what);
  };
  if (ck.model_name != options_.model)
    fail("it holds model '" + ck.model_name + "', this run trains '"
         + options_.model + "'");
  // Options that leave every shape alone (dropout, say) would otherwise
  // resume a different model without a word.
  auto saved_options = nlohmann::json::parse(ck.model_options_json, nullptr, false);
  if (saved_options.is_discarded())
    fail("its model options are not valid JSON");
  const auto our_options = to_json(options_.model_options);
  if (saved_options != our_options)
    fail("it was written with model options " + saved_options.dump() + ", this run has "
         + our_options.dump());
  auto meta = nlohmann::json::parse(ck.metadata, nullptr, false);
  if (meta.is_discarded())
    fail("its run metadata is not valid JSON");
  auto mine = run_metadata(options_);
  for (auto& [key, value] : mine.items())
    if (meta.value(key, nlohmann::json{}) != value)
      fail("'" + key + "' was " + meta.value(key, nlohmann::json{}).dump()
           + ", now " + value.dump() + " (data order would differ)");
  // A checkpoint's checksum proves it was not damaged, not that whoever
  // wrote it wrote sense: a negative position indexed before the epoch's
  // batches and crashed the run.
  if (ck.step < 0)
    fail("step " + std::to_string(ck.step) + " is negative");
  if (ck.epoch < 0 || ck.epoch > options_.epochs) // == epochs: a finished run
    fail("epoch " + std::to_string(ck.epoch) + " is outside this run's "
         + std::to_string(options_.epochs) + " epochs");
  auto epoch_samples = data::sampler{train_size(), options_.seed}.num_batches(
                         options_.batch_size) * options_.batch_size;
  if (ck.data_position < 0 || ck.data_position > epoch_samples)
    fail("data position " + std::to_string(ck.data_position)
         + " is outside an epoch of " + std::to_string(epoch_samples)
         + " samples");
  if (ck.data_position % options_.batch_size != 0)
    fail("data position " + std::to_string(ck.data_position)
         + " is not a batch boundary");
  // The steps its epoch and position put behind it (each batch one step): a
  // larger count would run the step counter past what this run can reach.
  const int64_t batches_per_epoch = epoch_samples / options_.batch_size;
  const int64_t reached = ck.epoch * batches_per_epoch + ck.data_position / options_.batch_size;
  if (ck.step != reached)
    fail("step " + std::to_string(ck.step) + " does not match its epoch " + std::to_string(ck.epoch)
         + " and data position " + std::to_string(ck.data_position) + " (step "
         + std::to_string(reached) + ")");
  try {
    model_->load_range_state(0, -1, ck.model_state);
    serialization::load_optimizer_state(*optimizer_, ck.optimizer);
  } catch (const std::exception& e) {
    fail(e.what());
  }
  step_ = ck.step;
  epoch_ = ck.epoch;
  batch_in_epoch_ = ck.data_position / options_.batch_size;
  serialization::restore_rng_state(ck.rng_state);
  spdlog::info("resumed from {} at step {} (epoch {}, sample {})", path, step_,
               epoch_, ck.data_position);
}

train_result trainer::run() {
  metrics_sink metrics{options_.metrics_path};
  progress_line progress{options_.progress};
  data::sampler order{train_size(), options_.seed};
  auto batches_per_epoch = order.num_batches(options_.batch_size);
  auto total_samples = (options_.epochs - epoch_) * train_size()
                       - batch_in_epoch_ * options_.batch_size;
  auto max_steps = options_.max_steps;

  train_result result;
  auto start = detail::monotonic_seconds();
  int64_t samples_done = 0;
  auto stop = [&] { return max_steps >= 0 && step_ >= max_steps; };
  metrics.emit("start", {{"model", options_.model},
                         {"dataset", options_.dataset},
                         {"parameters", model_->parameter_count()},
                         {"train_samples", train_size()},
                         {"batch_size", options_.batch_size},
                         {"epochs", options_.epochs},
                         {"step", step_}});
  spdlog::info("training {} ({} parameters) on {} ({} samples), batch {}, "
               "{} epochs, {} lr {}",
               options_.model, model_->parameter_count(), train_set_->name(),
               train_size(), options_.batch_size, options_.epochs,
               to_string(options_.optimizer.kind), options_.optimizer.lr);

  while (epoch_ < options_.epochs && !stop()) {
    auto batches = order.batches(epoch_, options_.batch_size);
    double loss_sum = 0.0;
    int64_t loss_count = 0;
    for (; batch_in_epoch_ < batches_per_epoch && !stop(); ++batch_in_epoch_) {
      auto b = train_set_->get_batch(batches[batch_in_epoch_]);
      optimizer_->zero_grad();
      auto loss = torch::nn::functional::cross_entropy(model_->forward(b.inputs),
                                                       b.targets);
      loss.backward();
      optimizer_->step();
      ++step_;
      auto l = loss.item<double>();
      loss_sum += l;
      ++loss_count;
      samples_done += b.size();
      auto elapsed = detail::monotonic_seconds() - start;
      auto rate = elapsed > 0 ? samples_done / elapsed : 0.0;
      progress.update("epoch " + std::to_string(epoch_ + 1) + "/"
                        + std::to_string(options_.epochs),
                      samples_done, total_samples, rate, l);
      if (options_.log_every > 0 && step_ % options_.log_every == 0)
        metrics.emit("step", {{"step", step_},
                              {"epoch", epoch_},
                              {"loss", l},
                              {"samples_per_s", rate}});
      if (!options_.checkpoint_path.empty() && options_.checkpoint_every > 0
          && step_ % options_.checkpoint_every == 0) {
        ++batch_in_epoch_; // the checkpoint resumes after this batch
        save(options_.checkpoint_path);
        --batch_in_epoch_;
      }
    }
    if (loss_count > 0)
      result.train_loss = loss_sum / static_cast<double>(loss_count);
    if (batch_in_epoch_ < batches_per_epoch)
      break; // stopped by max_steps mid-epoch
    ++epoch_;
    batch_in_epoch_ = 0;
    progress.finish();
    if (test_set_) {
      result.test = evaluate(model_, *test_set_, options_.eval_batch_size,
                             options_.test_limit);
      metrics.emit("eval", {{"epoch", epoch_},
                            {"step", step_},
                            {"test_loss", result.test.loss},
                            {"test_accuracy", result.test.accuracy},
                            {"train_loss", result.train_loss}});
      spdlog::info("epoch {}: train loss {:.4f}, test loss {:.4f}, test "
                   "accuracy {:.2f}%",
                   epoch_, result.train_loss, result.test.loss,
                   result.test.accuracy * 100);
    }
    if (!options_.checkpoint_path.empty() && options_.checkpoint_every == 0)
      save(options_.checkpoint_path);
  }
  progress.finish();
  result.seconds = detail::monotonic_seconds() - start;
  result.samples_per_s = result.seconds > 0 ? samples_done / result.seconds
                                            : 0.0;
  result.steps = step_;
  result.epochs = epoch_;
  if (!options_.checkpoint_path.empty())
    save(options_.checkpoint_path);
  metrics.emit("done", {{"steps", step_},
                        {"epochs", epoch_},
                        {"seconds", result.seconds},
                        {"samples_per_s", result.samples_per_s},
                        {"test_accuracy", result.test.accuracy}});
  return result;
}

} // namespace asteroid::training
