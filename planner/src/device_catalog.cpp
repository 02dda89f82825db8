#include "asteroid/planner/device_catalog.hpp"

#include <cmath>

#include "asteroid/planner/error.hpp"

namespace asteroid::planner {

namespace {

constexpr int64_t gib = int64_t{1} << 30;

// Epoch times of the Asteroid paper (background.md §1), minutes.
constexpr double mobilenetv2_tx2_min = 8.5;
constexpr double mobilenetv2_nano_min = 22.0;
constexpr double efficientnet_b1_tx2_min = 11.2;
constexpr double efficientnet_b1_nano_min = 26.7;

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

std::vector<device_type_info> build_catalog() {
  std::vector<device_type_info> c;
  c.push_back({"jetson-nano", "NVIDIA Jetson Nano: 128-core Maxwell, 4 GB", 1.0, 4 * gib,
               3 * gib, 128, 921.6, false});
  c.push_back({"jetson-tx2", "NVIDIA Jetson TX2: 256-core Pascal, 8 GB", tx2_speed(), 8 * gib,
               7 * gib, 256, 1300.0, false});
  c.push_back({"xavier-nx", "NVIDIA Jetson Xavier NX: 384-core Volta, 8 GB", nx_speed(),
               8 * gib, 7 * gib, 384, 1100.0, true});
  return c;
}

} // namespace

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

cluster rebase_speeds(const cluster& c, const model_profile& profile) {
  double base = catalog_speed(profile.device);
  cluster out = c;
  for (auto& d : out.devices)
    d.speed /= base;
  return out;
}

} // namespace asteroid::planner
