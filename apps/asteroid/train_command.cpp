#include "commands.hpp"
#include "number_checks.hpp"

#include "asteroid/training/trainer.hpp"

#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>

namespace asteroid::apps {

void add_train_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
    "train", "Train a model on this device (single-device training)");
  auto o = std::make_shared<training::trainer_options>();
  auto optimizer = std::make_shared<std::string>("sgd");
  auto no_eval = std::make_shared<bool>(false);
  auto width = std::make_shared<double>(1.0);
  auto config = std::make_shared<std::string>();
  cmd->add_option("--config", *config,
                  "Alias of `asteroid job --config FILE` (the one spelling "
                  "for running a job file on nodes; this one is kept for "
                  "older scripts): the other flags but --resume are then "
                  "ignored")
    ->check(CLI::ExistingFile);
  cmd->add_option("--model,-m", o->model,
                  "Model from the zoo (see `asteroid models`)")
    ->capture_default_str();
  cmd->add_option("--width-mult", *width, "Channel width multiplier of CNNs")
    ->check(finite_number(0, 16, true)) // as a job's model_options
    ->capture_default_str();
  cmd->add_option("--dataset,-d", o->dataset,
                  "fashion-mnist, cifar10, synthetic-images or "
                  "synthetic-tokens")
    ->capture_default_str();
  cmd->add_option("--data-dir", o->data_dir,
                  "Folder of the dataset files (default for fashion-mnist: "
                  "/usr/share/datasets/fashion-mnist; required for cifar10)");
  cmd->add_option("--train-limit", o->train_limit,
                  "Use only the first N training samples (0: all)");
  cmd->add_option("--test-limit", o->test_limit,
                  "Evaluate on only the first N test samples (0: all)");
  cmd->add_option("--batch-size,-b", o->batch_size, "Mini-batch size")
    ->check(positive_finite())
    ->capture_default_str();
  cmd->add_option("--epochs,-e", o->epochs, "Passes over the training set")
    ->check(positive_finite())
    ->capture_default_str();
  cmd->add_option("--max-steps", o->max_steps,
                  "Stop after this many optimizer steps (-1: no limit)")
    ->check(CLI::Range(int64_t{-1}, std::numeric_limits<int64_t>::max()))
    ->capture_default_str();
  cmd->add_option("--optimizer", *optimizer, "sgd (with momentum) or adam")
    ->check(CLI::IsMember({"sgd", "adam"}))
    ->capture_default_str();
  cmd->add_option("--lr", o->optimizer.lr, "Learning rate")
    ->check(positive_finite())
    ->capture_default_str();
  cmd->add_option("--momentum", o->optimizer.momentum, "SGD momentum")
    ->check(finite_number(0, 1, false, true))
    ->capture_default_str();
  cmd->add_option("--weight-decay", o->optimizer.weight_decay,
                  "L2 weight decay")
    ->check(non_negative_finite())
    ->capture_default_str();
  cmd->add_option("--seed", o->seed,
                  "Seeds initialisation, data order and dropout")
    ->capture_default_str();
  cmd->add_option("--threads", o->threads,
                  "LibTorch intra-op threads (0: LibTorch's default)")
    ->check(non_negative_finite())
    ->capture_default_str();
  cmd->add_option("--checkpoint", o->checkpoint_path,
                  "Write checkpoints to this file (atomically replaced)");
  cmd->add_option("--checkpoint-every", o->checkpoint_every,
                  "Checkpoint every N steps (0: at the end of each epoch)")
    ->check(non_negative_finite())
    ->capture_default_str();
  cmd->add_option("--resume", o->resume_from,
                  "Resume from this checkpoint (same model, dataset, batch "
                  "size and seed)")
    ->check(CLI::ExistingFile);
  cmd->add_flag("--no-eval", *no_eval,
                "Skip the test-split evaluation after each epoch");
  cmd->add_option("--metrics", o->metrics_path,
                  "Write JSON-lines metrics to this file ('-': stdout)");
  cmd->add_option("--log-every", o->log_every,
                  "Emit a step metric every N steps")
    ->check(positive_finite())
    ->capture_default_str();
  cmd->add_option("--progress", o->progress,
                  "Live progress line: -1 auto (terminal only), 0 off, 1 on")
    ->check(CLI::Range(-1, 1))
    ->capture_default_str();
  cmd->callback([o, optimizer, no_eval, width, config] {
    if (!config->empty()) {
      if (auto code = run_job_file(*config, o->resume_from))
        std::exit(code); // stopped by a signal: 128 + the signal
      return;
    }
    o->optimizer.kind = training::parse_optimizer(*optimizer);
    o->evaluate = !*no_eval;
    o->model_options.width_mult(*width);
    training::trainer t{*o};
    auto r = t.run();
    std::printf("trained %s for %lld steps (%lld epochs) in %.1f s, "
                "%.0f samples/s\n",
                o->model.c_str(), static_cast<long long>(r.steps),
                static_cast<long long>(r.epochs), r.seconds, r.samples_per_s);
    if (r.test.samples > 0)
      std::printf("test accuracy %.2f%% (loss %.4f) on %lld samples\n",
                  r.test.accuracy * 100, r.test.loss,
                  static_cast<long long>(r.test.samples));
  });
}

} // namespace asteroid::apps
