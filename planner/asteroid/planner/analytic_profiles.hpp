#pragma once

#include <string>
#include <vector>

#include "asteroid/planner/model_profile.hpp"

namespace asteroid::planner {

/// ANALYTIC profiles: estimates, not measurements.
///
/// Per-layer (block-granularity) FLOPs, parameter bytes and activation bytes
/// are computed exactly from the architectures (FP32); times are
/// FLOPs / an effective rate plus a per-kernel launch overhead, backward =
/// 2x forward. The effective rate of each model is calibrated so that one
/// jetson-nano epoch matches the Asteroid paper's epoch time;
/// see docs/planner.md for the derivations and assumptions. The profiler in
/// training/ produces measured profiles in the same format.
///
/// Models: "mobilenetv2" (CIFAR-10 variant, 3x32x32), "efficientnet-b1"
/// (CIFAR adaptation, 3x32x32), "resnet50" (3x224x224, 100 classes),
/// "bert-small" (4 layers, hidden 512, sequence 512), and for inference
/// "vit-large" (ViT-L/16 at 3x224x224, 1000 classes, attention and MLP
/// sub-layers as units: 50 layers, 304,326,632 parameters). The profile's
/// device is "jetson-nano" (speed 1.0 in the catalog).
model_profile analytic_profile(const std::string& model);

/// The training models of the paper's Table 4 that `analytic_profile`
/// accepts ("vit-large" is accepted too, for inference planning).
std::vector<std::string> analytic_model_names();

/// Forward FLOPs of one sample through the whole model (for docs/tests).
double analytic_forward_flops(const std::string& model);

} // namespace asteroid::planner
