// `asteroid checkpoint`: what a checkpoint holds, and whether two hold the
// same state (two runs of a job, one of them with faults, should end equal).
#include "commands.hpp"
#include "number_checks.hpp"

#include "asteroid/serialization/checkpoint.hpp"

#include <torch/torch.h>

#include <cstdio>
#include <map>
#include <memory>
#include <string>

namespace asteroid::apps {

namespace {

namespace ser = asteroid::serialization;

/// A job's checkpoint holds its optimizer in the model state, named as
/// stage states are (w/ weights, o/ optimizer buffers, h/ settings).
const char* category(const std::string& name) {
  return name.rfind("o/", 0) == 0   ? "optimizer state"
         : name.rfind("h/", 0) == 0 ? "optimizer settings"
                                    : "weights";
}

void show(const std::string& path) {
  auto c = ser::load_checkpoint(path);
  std::printf("%s\n", path.c_str());
  std::printf("  model              %s %s\n", c.model_name.c_str(),
              c.model_options_json.c_str());
  std::printf("  step               %lld (epoch %lld, data position %lld)\n",
              static_cast<long long>(c.step), static_cast<long long>(c.epoch),
              static_cast<long long>(c.data_position));
  std::map<std::string, std::pair<size_t, int64_t>> parts; // tensors, values
  for (const auto& [name, t] : c.model_state) {
    auto& [tensors, values] = parts[category(name)];
    ++tensors;
    values += t.numel();
  }
  for (const auto& [name, t] : c.optimizer.tensors) {
    auto& [tensors, values] = parts["optimizer state"];
    ++tensors;
    values += t.numel();
  }
  for (const auto& [name, count] : parts)
    std::printf("  %-18s %zu tensors, %lld values\n", name.c_str(), count.first,
                static_cast<long long>(count.second));
  if (!c.optimizer.kind.empty())
    std::printf("  optimizer          %s\n", c.optimizer.kind.c_str());
  for (const auto& [name, value] : c.optimizer.hyper_params)
    std::printf("    %-24s %g\n", name.c_str(), value);
  if (!c.metadata.empty())
    std::printf("  metadata           %s\n", c.metadata.c_str());
}

/// The largest |a - b| over two named lists and where it is; `mismatch`
/// names the first tensor that one list lacks or holds in another shape.
struct difference {
  double largest = 0;
  std::string where;
  std::string mismatch;
};

difference compare_tensors(const ser::named_tensors& a, const ser::named_tensors& b) {
  difference d;
  // By name: a job's checkpoint repeats each stage's optimizer settings
  // (h/lr once per stage), so the same state merged into fewer stages holds
  // fewer entries.
  std::map<std::string, const torch::Tensor*> in_a, in_b;
  for (const auto& [name, t] : a)
    in_a[name] = &t;
  for (const auto& [name, t] : b)
    in_b[name] = &t;
  for (const auto& [name, t] : in_b)
    if (!in_a.count(name) && d.mismatch.empty())
      d.mismatch = "'" + name + "' only in the second";
  for (const auto& [name, tp] : in_a) {
    const auto& t = *tp;
    auto it = in_b.find(name);
    if (it == in_b.end()) {
      if (d.mismatch.empty())
        d.mismatch = "'" + name + "' only in the first";
      continue;
    }
    const auto& u = *it->second;
    if (t.sizes() != u.sizes()) {
      if (d.mismatch.empty())
        d.mismatch = "'" + name + "' has shape " + c10::str(t.sizes()) + " against "
                     + c10::str(u.sizes());
      continue;
    }
    if (t.numel() == 0)
      continue;
    const double largest = (t.to(torch::kDouble) - u.to(torch::kDouble)).abs().max().item<double>();
    // NaN compares false: a NaN on either side is a difference, named.
    if (!(largest <= d.largest)) {
      d.largest = largest;
      d.where = name;
    }
  }
  return d;
}

/// 0 when the two hold the same model at the same step with every weight
/// and optimizer value within `tolerance`; 1 otherwise, saying why.
int compare(const std::string& first, const std::string& second, double tolerance) {
  auto a = ser::load_checkpoint(first);
  auto b = ser::load_checkpoint(second);
  bool same = true;
  auto differ = [&](const std::string& what) {
    std::printf("differ: %s\n", what.c_str());
    same = false;
  };
  if (a.model_name != b.model_name || a.model_options_json != b.model_options_json)
    differ("model " + a.model_name + " " + a.model_options_json + " against "
           + b.model_name + " " + b.model_options_json);
  if (a.step != b.step || a.epoch != b.epoch || a.data_position != b.data_position)
    differ("step " + std::to_string(a.step) + " (epoch " + std::to_string(a.epoch)
           + ", position " + std::to_string(a.data_position) + ") against "
           + std::to_string(b.step) + " (epoch " + std::to_string(b.epoch) + ", position "
           + std::to_string(b.data_position) + ")");
  if (a.optimizer.kind != b.optimizer.kind)
    differ("optimizer " + a.optimizer.kind + " against " + b.optimizer.kind);
  if (a.optimizer.hyper_params != b.optimizer.hyper_params)
    differ("optimizer settings (learning rate, momentum, ...; `asteroid checkpoint show`)");
  const char* order[] = {"weights", "optimizer state", "optimizer settings"};
  std::map<std::string, std::pair<ser::named_tensors, ser::named_tensors>> parts;
  for (const auto& [name, t] : a.model_state)
    parts[category(name)].first.emplace_back(name, t);
  for (const auto& [name, t] : b.model_state)
    parts[category(name)].second.emplace_back(name, t);
  for (const auto& entry : a.optimizer.tensors)
    parts["optimizer state"].first.push_back(entry);
  for (const auto& entry : b.optimizer.tensors)
    parts["optimizer state"].second.push_back(entry);
  for (const char* name : order) {
    auto it = parts.find(name);
    if (it == parts.end())
      continue;
    auto d = compare_tensors(it->second.first, it->second.second);
    if (!d.mismatch.empty()) {
      differ(std::string(name) + ": " + d.mismatch);
      continue;
    }
    std::printf("%-18s max |difference| %.3g%s%s\n", name, d.largest,
                d.where.empty() ? "" : " in ", d.where.c_str());
    if (!(d.largest <= tolerance))
      differ(std::string(name) + " beyond the tolerance " + c10::str(tolerance));
  }
  if (same)
    std::printf("same state at step %lld (tolerance %g)\n", static_cast<long long>(a.step),
                tolerance);
  return same ? 0 : 1;
}

} // namespace

void add_checkpoint_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
    "checkpoint", "Show what a checkpoint holds, or compare two (the final states of "
                  "two runs of a job, one of them with faults)");
  cmd->require_subcommand(1);

  auto* show_cmd = cmd->add_subcommand("show", "Model, step, tensor and optimizer summary");
  auto shown = std::make_shared<std::string>();
  show_cmd->add_option("checkpoint", *shown, "Checkpoint file")
    ->required()
    ->check(CLI::ExistingFile);
  show_cmd->callback([=] { show(*shown); });

  auto* compare_cmd = cmd->add_subcommand(
    "compare", "Exit 0 when both hold the same model at the same step with every weight "
               "and optimizer value within --tolerance, 1 when they differ (said on "
               "stdout), 2 when one cannot be read");
  auto first = std::make_shared<std::string>();
  auto second = std::make_shared<std::string>();
  auto tolerance = std::make_shared<double>(1e-4);
  compare_cmd->add_option("first", *first, "Checkpoint file")
    ->required()
    ->check(CLI::ExistingFile);
  compare_cmd->add_option("second", *second, "Checkpoint file")
    ->required()
    ->check(CLI::ExistingFile);
  compare_cmd
    ->add_option("--tolerance", *tolerance, "Largest |difference| of any value that counts "
                                            "as equal")
    ->check(non_negative_finite())
    ->capture_default_str();
  compare_cmd->callback([=] {
    int code = 0;
    try {
      code = compare(*first, *second, *tolerance);
    } catch (const ser::checkpoint_error& e) {
      std::fprintf(stderr, "asteroid: error: %s\n", e.what());
      code = 2;
    }
    if (code != 0)
      throw CLI::RuntimeError(code);
  });
}

} // namespace asteroid::apps
