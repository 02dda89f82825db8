// Hidden (slow) check that `cnn` learns: 2 epochs on Fashion-MNIST reach
// >= 88% test accuracy. Run explicitly: models_tests "[fashion_mnist]".
// It reads the IDX files itself so that it needs no other component.

#include "asteroid/models/zoo.hpp"

#include <catch2/catch.hpp>
#include <zlib.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <stdexcept>

using namespace asteroid::models;

namespace {

std::vector<uint8_t> read_gz(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr)
    throw std::runtime_error("cannot open " + path);
  std::vector<uint8_t> bytes;
  uint8_t buffer[1 << 16];
  int n;
  while ((n = gzread(f, buffer, sizeof buffer)) > 0)
    bytes.insert(bytes.end(), buffer, buffer + n);
  gzclose(f);
  return bytes;
}

/// Images as float [N, 1, 28, 28] normalised, labels as int64 [N].
std::pair<torch::Tensor, torch::Tensor> load(const std::string& dir,
                                             const std::string& split) {
  auto images = read_gz(dir + "/" + split + "-images-idx3-ubyte.gz");
  auto labels = read_gz(dir + "/" + split + "-labels-idx1-ubyte.gz");
  int64_t n = static_cast<int64_t>(labels.size()) - 8;
  REQUIRE(static_cast<int64_t>(images.size()) == 16 + n * 28 * 28);
  auto x = torch::from_blob(images.data() + 16, {n, 1, 28, 28}, torch::kUInt8)
             .to(torch::kFloat)
             .div_(255.0)
             .sub_(0.2860)
             .div_(0.3530);
  auto y = torch::from_blob(labels.data() + 8, {n}, torch::kUInt8).to(torch::kLong);
  return {x, y};
}

} // namespace

TEST_CASE("models: cnn reaches 88% on Fashion-MNIST in 2 epochs",
          "[.][slow][fashion_mnist]") {
  const char* env = std::getenv("ASTEROID_FASHION_MNIST");
  std::string dir = env ? env : "/usr/share/datasets/fashion-mnist";
  if (!std::ifstream(dir + "/t10k-labels-idx1-ubyte.gz")) {
    WARN("Fashion-MNIST not found under " << dir << "; skipped");
    return;
  }
  auto [train_x, train_y] = load(dir, "train");
  auto [test_x, test_y] = load(dir, "t10k");

  auto model = make_model("cnn", model_options().seed(0));
  torch::optim::Adam opt(model->parameters(), torch::optim::AdamOptions(1e-3));
  const int64_t batch = 64;
  auto start = std::chrono::steady_clock::now();
  for (int epoch = 0; epoch < 2; ++epoch) {
    model->train();
    auto perm = torch::randperm(train_x.size(0));
    for (int64_t i = 0; i < train_x.size(0); i += batch) {
      auto idx = perm.slice(0, i, std::min(i + batch, train_x.size(0)));
      opt.zero_grad();
      auto loss = torch::nn::functional::cross_entropy(model->forward(train_x.index({idx})),
                                                       train_y.index({idx}));
      loss.backward();
      opt.step();
    }
  }
  model->eval();
  torch::NoGradGuard no_grad;
  int64_t correct = 0;
  for (int64_t i = 0; i < test_x.size(0); i += 1000) {
    auto pred = model->forward(test_x.slice(0, i, i + 1000)).argmax(1);
    correct += pred.eq(test_y.slice(0, i, i + 1000)).sum().item<int64_t>();
  }
  double accuracy = static_cast<double>(correct) / static_cast<double>(test_x.size(0));
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
                     .count();
  WARN("cnn: test accuracy " << accuracy << " after 2 epochs, " << seconds << " s");
  CHECK(accuracy >= 0.88);
}
