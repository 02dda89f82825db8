#pragma once

#include "asteroid/data/dataset.hpp"
#include "asteroid/models/sequential_model.hpp"

#include <cstdint>

namespace asteroid::training {

/// Loss and accuracy of a model on a dataset.
struct eval_result {
  double loss = 0.0;
  double accuracy = 0.0;
  int64_t samples = 0;
};

/// Evaluates `model` (in eval mode, without gradients) on the first `limit`
/// samples of `set` (0: all) in order, `batch_size` at a time; restores the
/// model's training mode afterwards.
eval_result evaluate(models::sequential_model& model, const data::dataset& set,
                     int64_t batch_size, int64_t limit = 0);

} // namespace asteroid::training
