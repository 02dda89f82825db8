#include "asteroid/planner/device_catalog.hpp"

#include <cctype>
#include <cmath>

#include "asteroid/planner/error.hpp"

namespace asteroid::planner {

namespace {

constexpr int64_t gib = int64_t{1} << 30;

// Epoch times reported by the Asteroid paper, minutes.
constexpr double mobilenetv2_tx2_min = 8.5;
constexpr double mobilenetv2_nano_min = 22.0;
constexpr double efficientnet_b1_tx2_min = 11.2;
constexpr double efficientnet_b1_nano_min = 26.7;
constexpr double resnet50_tx2_hours = 1.14;

// TX2 vs Nano: geometric mean of the two measured epoch-time ratios
// (22/8.5 = 2.588, 26.7/11.2 = 2.384) = 2.484.
double tx2_speed() {
  return std::sqrt((mobilenetv2_nano_min / mobilenetv2_tx2_min) *
                   (efficientnet_b1_nano_min / efficientnet_b1_tx2_min));
}

// ASSUMPTION (no epoch time in the paper): Xavier NX scales from TX2 by
// CUDA cores x max GPU clock, 384 x 1100 MHz vs 256 x 1300 MHz = 1.269, i.e.
// the same per-core-per-cycle efficiency as TX2 (Volta's tensor cores are
// not used by FP32 training). Gives 3.15x Nano.
double nx_speed() {
  return tx2_speed() * (384.0 * 1100.0) / (256.0 * 1300.0);
}

// CIFAR-10's training set: the paper's epochs of MobileNetV2 and
// EfficientNet-B1.
constexpr double cifar10_train_samples = 50000;

double per_sample(double epoch_minutes) { return epoch_minutes * 60.0 / cifar10_train_samples; }

// ASSUMPTION: the paper's ResNet-50 epoch is all of Mini-ImageNet's 60,000
// images (it does not say how it splits them); as analytic_profiles.cpp.
constexpr double mini_imagenet_samples = 60000;

std::vector<device_type_info> build_catalog() {
  std::vector<device_type_info> c;
  c.push_back({"jetson-nano", "NVIDIA Jetson Nano: 128-core Maxwell, 4 GB", 1.0, 4 * gib,
               3 * gib, 128, 921.6, false, {}, {}});
  c.push_back({"jetson-tx2", "NVIDIA Jetson TX2: 256-core Pascal, 8 GB", tx2_speed(), 8 * gib,
               7 * gib, 256, 1300.0, false, {}, {}});
  c.push_back({"xavier-nx", "NVIDIA Jetson Xavier NX: 384-core Volta, 8 GB", nx_speed(),
               8 * gib, 7 * gib, 384, 1100.0, true, {}, {}});
  auto& nano = c[0];
  auto& tx2 = c[1];
  auto& nx = c[2];
  auto put = [](device_type_info& t, const std::string& model, double s, std::string source) {
    t.seconds_per_sample[model] = s;
    t.seconds_per_sample_source[model] = std::move(source);
  };
  put(nano, "mobilenetv2", per_sample(mobilenetv2_nano_min),
      "paper: 22 min per CIFAR-10 epoch (50,000 samples)");
  put(nano, "efficientnetb1", per_sample(efficientnet_b1_nano_min),
      "paper: 26.7 min per CIFAR-10 epoch (50,000 samples)");
  put(tx2, "mobilenetv2", per_sample(mobilenetv2_tx2_min),
      "paper: 8.5 min per CIFAR-10 epoch (50,000 samples)");
  put(tx2, "efficientnetb1", per_sample(efficientnet_b1_tx2_min),
      "paper: 11.2 min per CIFAR-10 epoch (50,000 samples)");
  put(tx2, "resnet50", resnet50_tx2_hours * 3600.0 / mini_imagenet_samples,
      "paper: 1.14 h per Mini-ImageNet epoch at 3x224x224 (ASSUMPTION: 60,000 samples)");
  // The paper gives no Nano time for ResNet-50 ("-"): the catalog's speed
  // ratio stands in for it.
  put(nano, "resnet50", tx2.seconds_per_sample.at("resnet50") * tx2.speed / nano.speed,
      "ASSUMPTION: jetson-tx2's time x (jetson-tx2 speed / jetson-nano speed = 2.484)");
  for (const auto& [model, s] : tx2.seconds_per_sample)
    put(nx, model, s * tx2.speed / nx.speed,
        "ASSUMPTION: jetson-tx2's time / (xavier-nx speed / jetson-tx2 speed = 1.269)");
  return c;
}

std::string model_key(const std::string& model) {
  std::string k;
  for (char ch : model)
    if (ch != '-' && ch != '_')
      k += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return k;
}

double lookup(const std::map<std::string, double>& m, const std::string& model) {
  auto key = model_key(model);
  for (const auto& [name, s] : m)
    if (model_key(name) == key)
      return s;
  return 0;
}

} // namespace

std::string catalog_model_options(const std::string& model) {
  const auto key = model_key(model);
  if (key == "mobilenetv2" || key == "efficientnetb1")
    return R"({"image_size":32,"num_classes":10})";
  if (key == "resnet50")
    return R"({"image_size":224,"num_classes":100})";
  return {};
}

const std::vector<device_type_info>& device_catalog() {
  static const std::vector<device_type_info> catalog = build_catalog();
  return catalog;
}

const device_type_info* find_device_type(const std::string& type) {
  for (const auto& t : device_catalog())
    if (t.type == type)
      return &t;
  return nullptr;
}

const device_type_info& device_type(const std::string& type) {
  if (auto* t = find_device_type(type))
    return *t;
  std::string known;
  for (const auto& t : device_catalog())
    known += (known.empty() ? "" : ", ") + t.type;
  throw planner_error("unknown device type \"" + type + "\" (known: " + known + ")");
}

device_spec make_device(std::string name, const std::string& type, std::string endpoint) {
  const auto& t = device_type(type);
  device_spec d;
  d.name = std::move(name);
  d.type = type;
  d.speed = t.speed;
  d.memory_bytes = t.default_budget_bytes;
  d.endpoint = std::move(endpoint);
  return d;
}

model_profile scale_profile(const model_profile& profile, double speed_factor,
                            std::string device) {
  if (!(speed_factor > 0.0))
    throw planner_error("scale_profile: speed factor must be positive, got " +
                        std::to_string(speed_factor));
  model_profile out = profile;
  out.device = std::move(device);
  for (auto& l : out.layers) {
    for (auto& t : l.forward_s)
      t /= speed_factor;
    for (auto& t : l.backward_s)
      t /= speed_factor;
  }
  return out;
}

model_profile scale_profile(const model_profile& profile, const std::string& to_type) {
  const auto& from = device_type(profile.device);
  const auto& to = device_type(to_type);
  return scale_profile(profile, to.speed / from.speed, to_type);
}

double catalog_speed(const std::string& device_type) {
  auto* t = find_device_type(device_type);
  return t ? t->speed : 1.0;
}

double seconds_per_sample(const device_spec& d, const std::string& model) {
  if (double s = lookup(d.seconds_per_sample, model); s > 0)
    return s;
  if (auto* t = find_device_type(d.type))
    return lookup(t->seconds_per_sample, model);
  return 0;
}

cluster absolute_speeds(const cluster& c, const std::string& model,
                        double host_seconds_per_sample) {
  if (!(host_seconds_per_sample > 0))
    throw planner_error("absolute_speeds: the host's seconds per sample must be positive, got " +
                        std::to_string(host_seconds_per_sample));
  cluster out = c;
  for (auto& d : out.devices) {
    double s = seconds_per_sample(d, model);
    if (!(s > 0))
      throw planner_error("absolute_speeds: device " + d.name +
                          (d.type.empty() ? std::string() : " (" + d.type + ")") +
                          " has no seconds_per_sample for model \"" + model +
                          "\" (give it in the cluster file)");
    d.speed = host_seconds_per_sample / s;
  }
  return out;
}

cluster rebase_speeds(const cluster& c, const model_profile& profile) {
  double base = catalog_speed(profile.device);
  cluster out = c;
  for (auto& d : out.devices)
    d.speed /= base;
  return out;
}

} // namespace asteroid::planner
