#include "asteroid/serialization/checkpoint.hpp"
#include "asteroid/serialization/module_state.hpp"
#include "asteroid/serialization/optimizer_state.hpp"
#include "asteroid/serialization/rng_state.hpp"

#include <catch2/catch.hpp>

#include <functional>

using namespace asteroid::serialization;

namespace {

using make_optimizer =
  std::function<std::unique_ptr<torch::optim::Optimizer>(std::vector<torch::Tensor>)>;

// Data comes from the global generator, so resuming also needs the RNG state.
void train_steps(torch::nn::Linear& model, torch::optim::Optimizer& opt, int steps) {
  for (int i = 0; i < steps; ++i) {
    auto x = torch::randn({8, 5});
    auto y = torch::randn({8, 2});
    opt.zero_grad();
    auto loss = torch::mse_loss(model->forward(x), y);
    loss.backward();
    opt.step();
  }
}

std::string ckpt_path(const std::string& name) {
  return std::string(ASTEROID_TEST_TMP) + "/" + name + ".ckpt";
}

// Trains 10 steps straight, and 5 + checkpoint-to-disk + 5 in a fresh
// model/optimizer; returns (uninterrupted, resumed) weights.
std::pair<torch::Tensor, torch::Tensor> run_both(const make_optimizer& make, bool restore_opt,
                                                 const std::string& name) {
  torch::manual_seed(42);
  torch::nn::Linear ref(5, 2);
  auto ref_opt = make(ref->parameters());
  train_steps(ref, *ref_opt, 10);

  torch::manual_seed(42);
  torch::nn::Linear first(5, 2);
  auto first_opt = make(first->parameters());
  train_steps(first, *first_opt, 5);
  checkpoint c;
  c.model_state = capture_module_state(*first);
  c.optimizer = capture_optimizer_state(*first_opt);
  c.rng_state = capture_rng_state();
  c.step = 5;
  save_checkpoint(ckpt_path(name), c);

  torch::manual_seed(1234); // different init and stream: all must come from the file
  torch::nn::Linear second(5, 2);
  auto second_opt = make(second->parameters());
  auto loaded = load_checkpoint(ckpt_path(name));
  load_module_state(*second, loaded.model_state);
  if (restore_opt)
    load_optimizer_state(*second_opt, loaded.optimizer);
  restore_rng_state(loaded.rng_state);
  train_steps(second, *second_opt, 5);
  return {torch::cat({ref->weight.flatten(), ref->bias}),
          torch::cat({second->weight.flatten(), second->bias})};
}

} // namespace

TEST_CASE("resumed SGD-momentum training is bit-identical", "[optimizer_state]") {
  make_optimizer sgd = [](std::vector<torch::Tensor> p) {
    return std::make_unique<torch::optim::SGD>(
      p, torch::optim::SGDOptions(0.05).momentum(0.9).weight_decay(1e-3));
  };
  auto [ref, resumed] = run_both(sgd, true, "sgd");
  CHECK(torch::equal(ref, resumed));
  // Control: without the momentum buffers the result differs, so the check
  // above really depends on the optimizer state.
  auto [ref2, fresh] = run_both(sgd, false, "sgd_control");
  CHECK_FALSE(torch::equal(ref2, fresh));
}

TEST_CASE("resumed Adam training is bit-identical", "[optimizer_state]") {
  for (bool amsgrad : {false, true}) {
    CAPTURE(amsgrad);
    make_optimizer adam = [amsgrad](std::vector<torch::Tensor> p) {
      return std::make_unique<torch::optim::Adam>(
        p, torch::optim::AdamOptions(0.01).amsgrad(amsgrad));
    };
    auto [ref, resumed] = run_both(adam, true, "adam");
    CHECK(torch::equal(ref, resumed));
    auto [ref2, fresh] = run_both(adam, false, "adam_control");
    CHECK_FALSE(torch::equal(ref2, fresh));
  }
}

TEST_CASE("optimizer state records hyper-parameters and buffers", "[optimizer_state]") {
  torch::nn::Linear m(3, 1);
  torch::optim::Adam opt(m->parameters(), torch::optim::AdamOptions(0.5).betas({0.8, 0.95}));
  auto empty = capture_optimizer_state(opt);
  CHECK(empty.kind == "adam");
  CHECK(empty.tensors.empty()); // never stepped: no per-parameter state

  m->forward(torch::ones({1, 3})).sum().backward();
  opt.step();
  auto s = capture_optimizer_state(opt);
  std::vector<std::string> names;
  for (auto& [n, t] : s.tensors)
    names.push_back(n);
  CHECK(names == std::vector<std::string>{"param.0.step", "param.0.exp_avg", "param.0.exp_avg_sq",
                                          "param.1.step", "param.1.exp_avg", "param.1.exp_avg_sq"});
  CHECK(s.tensors[0].second.item<int64_t>() == 1);
  auto find = [&](const std::string& n) {
    for (auto& [k, v] : s.hyper_params)
      if (k == n)
        return v;
    FAIL("no hyper-parameter " << n);
    return 0.0;
  };
  CHECK(find("group.0.lr") == 0.5);
  CHECK(find("group.0.beta1") == 0.8);
  CHECK(find("group.0.params") == 2);

  // An edited learning rate (a schedule) is restored too.
  torch::optim::Adam other(m->parameters(), torch::optim::AdamOptions(0.001));
  load_optimizer_state(other, s);
  auto& o = static_cast<torch::optim::AdamOptions&>(other.param_groups()[0].options());
  CHECK(o.lr() == 0.5);
  CHECK(std::get<1>(o.betas()) == 0.95);
}

TEST_CASE("optimizer state mismatches are named", "[optimizer_state][errors]") {
  torch::nn::Linear m(3, 2);
  torch::optim::SGD sgd(m->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  m->forward(torch::ones({1, 3})).sum().backward();
  sgd.step();
  auto s = capture_optimizer_state(sgd);
  REQUIRE(s.tensors.size() == 2);

  torch::optim::Adam adam(m->parameters(), torch::optim::AdamOptions(0.1));
  CHECK_THROWS_WITH(load_optimizer_state(adam, s),
                    "optimizer state: saved for 'sgd' but the optimizer is 'adam'");

  torch::nn::Linear bigger(4, 2);
  torch::optim::SGD sgd2(bigger->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  CHECK_THROWS_WITH(load_optimizer_state(sgd2, s),
                    "optimizer state: param.0.momentum_buffer has shape [2, 3] but the "
                    "parameter has [2, 4]");

  auto bad_index = s;
  bad_index.tensors[0].first = "param.7.momentum_buffer";
  CHECK_THROWS_WITH(load_optimizer_state(sgd, bad_index),
                    Catch::Contains("parameter index out of range (optimizer has 2 parameters)"));

  torch::optim::SGD one_param(std::vector<torch::Tensor>{m->weight},
                              torch::optim::SGDOptions(0.1).momentum(0.9));
  CHECK_THROWS_WITH(load_optimizer_state(one_param, s),
                    "optimizer state: group.0.params is 2 but the optimizer has 1");

  auto unknown = s;
  unknown.tensors[1].first = "param.1.velocity";
  CHECK_THROWS_WITH(load_optimizer_state(sgd, unknown),
                    Catch::Contains("missing tensor 'param.1.momentum_buffer'"));

  torch::optim::RMSprop rms(m->parameters(), torch::optim::RMSpropOptions(0.1));
  CHECK_THROWS_AS(capture_optimizer_state(rms), std::invalid_argument);
}
