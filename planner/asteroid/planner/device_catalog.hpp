#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "asteroid/planner/cluster.hpp"
#include "asteroid/planner/model_profile.hpp"

namespace asteroid::planner {

/// One known device type; speeds are relative to jetson-nano = 1.0.
///
/// Speeds are derived from the epoch times of the Asteroid paper (see
/// docs/planner.md, "Device catalog"); xavier-nx is an ASSUMPTION scaled from
/// CUDA cores x GPU clock because the paper gives no epoch time for it.
struct device_type_info {
  std::string type;
  std::string description;
  /// Training speed relative to jetson-nano.
  double speed = 1.0;
  /// Physical memory (shared CPU/GPU on Jetsons).
  int64_t memory_bytes = 0;
  /// What a cluster file gets when it gives a type but no memory: physical
  /// memory minus 1 GiB for the OS, CUDA context and runtime (assumption).
  int64_t default_budget_bytes = 0;
  int cuda_cores = 0;
  double gpu_clock_mhz = 0.0;
  /// True when `speed` is not derived from a measurement.
  bool speed_is_assumption = false;
  /// Seconds per training sample by model, from the paper's epoch times
  /// (CIFAR-10: 50,000 samples per epoch; Mini-ImageNet: 60,000, an
  /// ASSUMPTION) where it reports them, on the input `catalog_model_options`
  /// names; the times it does not report (xavier-nx's, ResNet-50 on
  /// jetson-nano) scaled from jetson-tx2's by the catalog speeds (ASSUMPTION).
  std::map<std::string, double> seconds_per_sample;
  /// Where each figure of `seconds_per_sample` comes from.
  std::map<std::string, std::string> seconds_per_sample_source;
};

/// The input the catalog's times per sample of `model` are for, as zoo
/// model options (JSON text): the paper's datasets, CIFAR-10 (3x32x32, 10
/// classes) for MobileNetV2 and EfficientNet-B1, Mini-ImageNet (3x224x224,
/// 100 classes) for ResNet-50; empty for a model the catalog has no time
/// of. A machine compared with those times must be measured on that input.
std::string catalog_model_options(const std::string& model);

/// The catalog: jetson-nano, jetson-tx2, xavier-nx.
const std::vector<device_type_info>& device_catalog();

/// The catalog entry for `type`, or nullptr.
const device_type_info* find_device_type(const std::string& type);

/// The catalog entry for `type`; throws `planner_error` listing known types.
const device_type_info& device_type(const std::string& type);

/// A device of a catalog type with the default budget and catalog speed.
device_spec make_device(std::string name, const std::string& type,
                        std::string endpoint = {});

/// A profile whose times are divided by `speed_factor` (a device that is
/// `speed_factor` times faster); the device name becomes `device`.
model_profile scale_profile(const model_profile& profile, double speed_factor,
                            std::string device);

/// The profile converted to catalog device type `to_type`, using the catalog
/// speeds of `profile.device` and `to_type` (throws if either is unknown).
model_profile scale_profile(const model_profile& profile, const std::string& to_type);

/// Speed of a profile's device relative to jetson-nano (1.0 if the profile's
/// device is not in the catalog, e.g. "analytic-nano" or "local").
double catalog_speed(const std::string& device_type);

/// Seconds per training sample of `model` on device `d`: its own figure,
/// else its catalog type's; 0 when neither knows the model. Model names are
/// compared without case, '-' and '_' ("efficientnet_b1" = "EfficientNet-B1").
double seconds_per_sample(const device_spec& d, const std::string& model);

/// The cluster with absolute speeds: each device's speed becomes
/// `host_seconds_per_sample / seconds_per_sample(device, model)`, i.e.
/// relative to the machine that measured `host_seconds_per_sample` (the
/// profile's device). Throws `planner_error` naming the first device whose
/// time for `model` is unknown, and for a non-positive host time.
cluster absolute_speeds(const cluster& c, const std::string& model,
                        double host_seconds_per_sample);

/// The cluster with speeds made relative to the profile's device: cluster
/// files hold jetson-nano-relative speeds, the cost model wants speeds
/// relative to the device the profile was measured on.
cluster rebase_speeds(const cluster& c, const model_profile& profile);

} // namespace asteroid::planner
