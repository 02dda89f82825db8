#pragma once
/// \file
/// The state of a layer range that fault tolerance copies around: weights,
/// buffers and optimizer state, named by *layer* rather than by position, so
/// that ranges can be merged or split when a plan is patched (a lost stage
/// merged into its neighbour needs the union of two snapshots).
///
/// Names: "w/<layer>.<tensor>" for range_state entries, "o/<layer>.<param>/
/// <field>" for optimizer buffers (momentum_buffer, exp_avg, ...), and
/// "h/<option>" for hyper-parameters (0-dim float64). A state without "o/"
/// entries means a fresh optimizer (the first deployment).
#include "asteroid/models/sequential_model.hpp"
#include "asteroid/serialization/tensor_wire.hpp"

#include <torch/torch.h>

#include <string>

namespace asteroid::actors {

/// Deep copy of layers [first, end) of `model` and of `opt` (built over
/// `model->range_parameters(first, end)`; null: weights only); with
/// tensor_capture::share, the tensors themselves, to encode at once.
serialization::named_tensors
capture_stage_state(const models::sequential_model& model, int first, int end,
                    const torch::optim::Optimizer* opt,
                    serialization::tensor_capture how = serialization::tensor_capture::copy);

/// Loads the entries of layers [first, end) from `state` (which may cover
/// more layers) into `model`, and into `opt` when `state` has optimizer
/// entries. Throws std::invalid_argument naming the missing or bad entry.
void load_stage_state(models::sequential_model& model, int first, int end,
                      torch::optim::Optimizer* opt,
                      const serialization::named_tensors& state);

/// Entries of `state` that belong to layers [first, end) of `model`.
serialization::named_tensors
select_stage_state(const models::sequential_model& model, int first, int end,
                   const serialization::named_tensors& state);

/// True when `state` has an entry for every tensor of layers [first, end).
bool covers(const models::sequential_model& model, int first, int end,
            const serialization::named_tensors& state);

} // namespace asteroid::actors
