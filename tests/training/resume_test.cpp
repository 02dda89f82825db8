// Resuming from a checkpoint must continue to exactly the weights of an
// uninterrupted run with the same seed: data order, optimizer state and the
// dropout RNG all come back.
#include "asteroid/serialization/checkpoint.hpp"
#include "asteroid/training/trainer.hpp"

#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <limits>
#include <random>

using namespace asteroid;

namespace {

training::trainer_options tiny_run(const std::string& model,
                                   const std::string& dataset,
                                   training::optimizer_kind opt) {
  training::trainer_options o;
  o.model = model;
  o.dataset = dataset;
  o.train_limit = 96;
  o.test_limit = 32;
  o.batch_size = 16; // 6 steps per epoch
  o.epochs = 2;
  o.optimizer.kind = opt;
  o.optimizer.lr = opt == training::optimizer_kind::adam ? 1e-3 : 0.05;
  o.seed = 7;
  o.progress = 0;
  o.evaluate = false;
  o.model_options.hidden_sizes({32});
  return o;
}

double max_abs_diff(training::trainer& a, training::trainer& b) {
  auto sa = a.model()->range_state(0, -1);
  auto sb = b.model()->range_state(0, -1);
  REQUIRE(sa.size() == sb.size());
  double worst = 0.0;
  for (size_t i = 0; i < sa.size(); ++i) {
    REQUIRE(sa[i].first == sb[i].first);
    auto d = (sa[i].second.to(torch::kDouble) - sb[i].second.to(torch::kDouble))
               .abs();
    if (d.numel() > 0)
      worst = std::max(worst, d.max().item<double>());
  }
  return worst;
}

/// Options that resume from the checkpoint of a 2-step mlp run written to
/// `name` in the test folder (the run is done here).
training::trainer_options resuming_two_steps(const std::string& name) {
  auto o = tiny_run("mlp", "synthetic-images", training::optimizer_kind::sgd);
  o.max_steps = 2;
  o.checkpoint_path = std::string{ASTEROID_TEST_TMP} + "/" + name;
  training::trainer{o}.run();
  o.resume_from = o.checkpoint_path;
  o.checkpoint_path.clear();
  return o;
}

void check_resume(training::trainer_options o, int64_t stop_at) {
  auto path = std::string{ASTEROID_TEST_TMP} + "/resume-" + o.model + "-"
              + training::to_string(o.optimizer.kind) + ".ckpt";
  std::filesystem::remove(path);

  training::trainer full{o};
  auto full_result = full.run();
  REQUIRE(full_result.steps == 12);

  auto first_half = o;
  first_half.max_steps = stop_at;
  first_half.checkpoint_path = path;
  training::trainer a{first_half};
  REQUIRE(a.run().steps == stop_at);

  auto second_half = o;
  second_half.resume_from = path;
  training::trainer b{second_half};
  REQUIRE(b.step() == stop_at);
  auto r = b.run();
  CHECK(r.steps == 12);
  CHECK(max_abs_diff(full, b) == 0.0);
}

} // namespace

TEST_CASE("resume mid-epoch with SGD momentum equals an uninterrupted run",
          "[training][resume]") {
  check_resume(tiny_run("mlp", "synthetic-images",
                        training::optimizer_kind::sgd),
               4);
}

TEST_CASE("resume at an epoch boundary with Adam equals an uninterrupted run",
          "[training][resume]") {
  check_resume(tiny_run("cnn", "synthetic-images",
                        training::optimizer_kind::adam),
               6);
}

TEST_CASE("resume restores the dropout RNG (BERT with dropout)",
          "[training][resume]") {
  auto o = tiny_run("bert_tiny", "synthetic-tokens",
                    training::optimizer_kind::adam);
  o.model_options.dropout(0.1);
  check_resume(o, 5);
}

TEST_CASE("resume refuses a checkpoint of another run", "[training][resume]") {
  auto other_batch = resuming_two_steps("resume-mismatch.ckpt");
  const auto path = other_batch.resume_from;
  other_batch.batch_size = 8;
  CHECK_THROWS_WITH(training::trainer{other_batch},
                    Catch::Contains("'batch_size' was 16, now 8"));

  auto other_model = other_batch;
  other_model.batch_size = 16;
  other_model.model = "cnn";
  CHECK_THROWS_WITH(training::trainer{other_model},
                    Catch::Contains("holds model 'mlp'")
                      && Catch::Contains(path));
}

TEST_CASE("resume refuses a checkpoint whose checksum holds but whose "
          "position is impossible", "[training][resume]") {
  auto resume = resuming_two_steps("resume-impossible.ckpt");
  const auto path = resume.resume_from;
  CHECK_NOTHROW(training::trainer{resume});
  auto good = serialization::load_checkpoint(path);
  // Each is written with a valid checksum, as a careless or hostile writer
  // would; a data position of -64 used to crash the run.
  auto refused = [&](serialization::checkpoint ck, const std::string& says) {
    serialization::save_checkpoint(path, ck);
    CHECK_THROWS_WITH(training::trainer{resume},
                      Catch::Contains("cannot resume from") && Catch::Contains(says));
  };
  auto ck = good;
  ck.data_position = -64;
  refused(ck, "data position -64 is outside an epoch of");
  ck = good;
  ck.data_position = int64_t{1} << 40;
  refused(ck, "is outside an epoch of");
  ck = good;
  ck.step = -1;
  refused(ck, "step -1 is negative");
  ck = good;
  ck.epoch = -3;
  refused(ck, "epoch -3 is outside this run's");
  ck = good;
  ck.epoch = resume.epochs + 1;
  refused(ck, "is outside this run's");
  // A step count its epoch and position do not add up to (INT64_MAX would
  // run the step counter over).
  ck = good;
  ck.step = std::numeric_limits<int64_t>::max();
  refused(ck, "does not match its epoch");
  ck = good;
  ck.step = good.step + 1;
  refused(ck, "step " + std::to_string(good.step + 1) + " does not match its epoch");
  // Other model options, even ones that change no shape, or none readable.
  ck = good;
  ck.model_options_json = R"({"dropout": 0.5})";
  refused(ck, "it was written with model options {\"dropout\":0.5}, this run has");
  ck = good;
  ck.model_options_json = "not json";
  refused(ck, "its model options are not valid JSON");
}

TEST_CASE("mutated checkpoints (valid checksums) resume or are refused by name",
          "[training][resume][fuzz]") {
  auto o = resuming_two_steps("fuzz-base.ckpt");
  const auto base = serialization::load_checkpoint(o.resume_from);
  const auto path = std::string{ASTEROID_TEST_TMP} + "/fuzz-mutated.ckpt";
  std::mt19937_64 rng(31);
  const std::vector<int64_t> odd{-1, 0, 1, 7, -64, 1 << 20, std::numeric_limits<int64_t>::max(),
                                 std::numeric_limits<int64_t>::min()};
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  int ran = 0, refused = 0;
  const int rounds = 200;
  for (int i = 0; i < rounds; ++i) {
    auto c = base;
    const bool in_model = pick(2) != 0;
    auto& ts = in_model ? c.model_state : c.optimizer.tensors;
    std::string what;
    bool must_refuse = false; // a checkpoint no run could have written
    switch (pick(10)) {
      case 0: c.step = odd[pick(odd.size())]; what = "step"; break;
      case 1: c.epoch = odd[pick(odd.size())]; what = "epoch"; break;
      case 2: c.data_position = odd[pick(odd.size())]; what = "data position"; break;
      case 3:
        if (!ts.empty()) {
          auto& t = ts[pick(ts.size())].second;
          must_refuse = true; // flattened, or one element more: never its shape
          t = t.dim() > 1 ? t.reshape({-1}) : torch::zeros({t.numel() + 1});
        }
        what = "a tensor's shape";
        break;
      case 4:
        if (!ts.empty()) {
          auto& t = ts[pick(ts.size())].second;
          must_refuse = pick(2) != 0;
          t = t.to(must_refuse ? torch::kLong : torch::kDouble); // doubles: a cast, no loss
        }
        what = "a tensor's type";
        break;
      case 5:
        // A parameter's whole optimizer state may be absent (one never
        // stepped); a module tensor may not.
        must_refuse = in_model && !ts.empty();
        if (!ts.empty())
          ts.erase(ts.begin() + static_cast<long>(pick(ts.size())));
        what = "a tensor gone";
        break;
      case 6:
        must_refuse = !ts.empty();
        if (!ts.empty())
          ts[pick(ts.size())].first += "x";
        what = "a tensor renamed";
        break;
      case 7:
        c.model_name = pick(2) ? "cnn" : "no-such-model";
        must_refuse = true;
        what = "model";
        break;
      case 8: {
        const char* docs[] = {"{}", "not json", "{\"hidden_sizes\": [7]}", "[1]",
                              "{\"num_classes\": 3}"};
        c.model_options_json = docs[pick(5)];
        must_refuse = c.model_options_json != base.model_options_json;
        what = "model options";
        break;
      }
      default:
        c.optimizer.kind = pick(2) ? "adam" : "?";
        what = "optimizer kind";
        break;
    }
    serialization::save_checkpoint(path, c);
    auto again = o;
    again.resume_from = path;
    again.max_steps = 4;
    INFO("round " << i << ": " << what);
    try {
      training::trainer t{again};
      t.run();
      ++ran;
      CHECK_FALSE(must_refuse);
    } catch (const std::exception& e) {
      std::string msg = e.what();
      INFO("error: " << msg);
      CHECK(msg.find("fuzz-mutated.ckpt") != std::string::npos);
      CHECK(msg.find("Exception raised from") == std::string::npos);
      ++refused;
    }
  }
  std::printf("[checkpoint fuzz] %d mutated checkpoints: %d resumed and trained, %d refused "
              "naming the file\n", rounds, ran, refused);
  CHECK(refused > rounds / 4);
}
