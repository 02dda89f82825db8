// Trains the small CNN on Fashion-MNIST (or, with `--synthetic`, on generated
// images) with the library API that `asteroid train` is built on.
//
// Usage: example_single_device [--synthetic] [max-steps]
#include <asteroid/training/trainer.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>

int main(int argc, char** argv) {
  asteroid::training::trainer_options options;
  options.model = "cnn";
  options.dataset = "fashion-mnist";
  options.epochs = 1;
  options.progress = 0;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--synthetic") == 0) {
      options.dataset = "synthetic-images";
      options.evaluate = true;
    } else {
      options.max_steps = std::atoll(argv[i]);
    }
  }
  try {
    asteroid::training::trainer trainer{options};
    auto result = trainer.run();
    std::printf("steps %lld, train loss %.4f, test accuracy %.4f\n",
                static_cast<long long>(result.steps), result.train_loss,
                result.test.accuracy);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "example_single_device: %s\n", e.what());
    return 1;
  }
  return 0;
}
