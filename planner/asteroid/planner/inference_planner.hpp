#pragma once
/// \file
/// Planners for pipelined inference (inference_plan.hpp).
///
/// `plan_inference` is EdgePipe's dynamic program (Hu et al., "Pipeline
/// Parallelism for Inference on Heterogeneous Edge Computing", 2021) over
/// device *types*: its state is (layers placed, how many devices of each
/// type are used, the type of the last stage's device), so its size is
/// layers x prod(n_k + 1) x types, and it is exact when a device's speed,
/// memory and links depend only on its type. Devices are grouped by (type
/// name, speed, memory); between two types the DP prices the slowest link
/// of any two of their devices, which is the link itself when links follow
/// the types (as in every catalog cluster) and a bound otherwise.

#include <cstdint>

#include "asteroid/planner/inference_plan.hpp"

namespace asteroid::planner {

/// The highest-throughput pipeline within every device's memory, by the
/// DP above. Throws planner_error when no plan fits, or when the DP would
/// visit more than `max_states` states (too many distinct device types;
/// the message says how many and suggests giving equal devices one type).
inference_plan plan_inference(const model_profile& profile, const cluster& c,
                              const inference_options& options,
                              int64_t max_states = 20'000'000);

/// Test oracle: every cut of the layers into stages and every ordered
/// choice of distinct devices for them. Throws planner_error when the
/// search would exceed `max_evaluations` (layers <= 7 and devices <= 5 stay
/// below the default) or when no plan fits.
inference_plan plan_inference_exhaustive(const model_profile& profile,
                                         const cluster& c,
                                         const inference_options& options,
                                         int64_t max_evaluations = 20'000'000);

/// Baseline: the whole model on the single device that serves it fastest
/// among those whose memory holds it. Throws planner_error when none does.
inference_plan plan_inference_on_device(const model_profile& profile,
                                        const cluster& c,
                                        const inference_options& options);

/// Baseline: a straight pipeline over every device in the cluster's order,
/// the layers cut so that each stage has an equal share of the profiled
/// compute, as if the devices were equal (speeds, memory and links
/// ignored). Its memory is not checked: inference_fits_memory says whether
/// it would run.
inference_plan plan_inference_straight(const model_profile& profile,
                                       const cluster& c,
                                       const inference_options& options);

} // namespace asteroid::planner
