#include <catch2/catch.hpp>

#include "asteroid/training/optimizer.hpp"
#include "asteroid/training/trainer.hpp"

using namespace asteroid;

namespace {

training::trainer_options small_synthetic() {
  training::trainer_options o;
  o.model = "cnn";
  o.dataset = "synthetic-images";
  o.train_limit = 512;
  o.test_limit = 256;
  o.batch_size = 32;
  o.epochs = 1;
  o.progress = 0;
  return o;
}

} // namespace

TEST_CASE("training the CNN on synthetic images learns", "[training]") {
  auto o = small_synthetic();
  o.epochs = 2;
  o.optimizer.lr = 0.05;
  training::trainer t{o};
  auto r = t.run();
  CHECK(r.steps == 32);
  CHECK(r.epochs == 2);
  CHECK(r.test.samples == 256);
  // Ten classes: chance is 0.1 and an untrained loss is about ln 10 = 2.3.
  CHECK(r.test.accuracy > 0.6);
  CHECK(r.train_loss < 1.5);
  CHECK(r.samples_per_s > 0);
}

TEST_CASE("max_steps stops mid-epoch", "[training]") {
  auto o = small_synthetic();
  o.max_steps = 3;
  o.evaluate = false;
  training::trainer t{o};
  auto r = t.run();
  CHECK(r.steps == 3);
  CHECK(r.epochs == 0);
}

TEST_CASE("bad training options are named", "[training][errors]") {
  auto o = small_synthetic();
  SECTION("unknown model") {
    o.model = "resnet7";
    CHECK_THROWS_WITH(training::trainer{o}, Catch::Contains("resnet7")
                                              && Catch::Contains("cnn"));
  }
  SECTION("unknown dataset") {
    o.dataset = "imagenet-22k";
    CHECK_THROWS_WITH(training::trainer{o},
                      Catch::Contains("imagenet-22k")
                        && Catch::Contains("fashion-mnist"));
  }
  SECTION("batch size") {
    o.batch_size = 0;
    CHECK_THROWS_WITH(training::trainer{o}, Catch::Contains("batch size"));
  }
  SECTION("cifar10 folder missing") {
    o.dataset = "cifar10";
    o.data_dir = std::string{ASTEROID_TEST_TMP} + "/no-such-cifar";
    CHECK_THROWS_WITH(training::trainer{o}, Catch::Contains("no-such-cifar"));
  }
  SECTION("resume file missing") {
    o.resume_from = std::string{ASTEROID_TEST_TMP} + "/missing.ckpt";
    CHECK_THROWS_WITH(training::trainer{o}, Catch::Contains("missing.ckpt"));
  }
  SECTION("optimizer name and learning rate") {
    CHECK_THROWS_WITH(training::parse_optimizer("rmsprop"),
                      Catch::Contains("rmsprop") && Catch::Contains("adam"));
    training::optimizer_options bad;
    bad.lr = -1;
    CHECK_THROWS_WITH(training::make_optimizer(bad, {}),
                      Catch::Contains("learning rate"));
  }
}
