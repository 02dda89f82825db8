#include "asteroid/planner/model_profile.hpp"

#include <stdexcept>

namespace asteroid::planner {

namespace {

// Piecewise-linear in the batch size, extrapolated from the two nearest
// samples: per-sample cost is roughly constant beyond the sampled range, and
// a launch overhead shows up as the intercept at small sizes.
double interpolate(const std::vector<int64_t>& xs, const std::vector<double>& ys,
                   double x) {
  if (xs.empty() || xs.size() != ys.size())
    throw std::logic_error("layer_profile: times do not match batch sizes");
  if (xs.size() == 1)
    return ys[0] * x / static_cast<double>(xs[0]);
  size_t hi = 1;
  while (hi + 1 < xs.size() && x > static_cast<double>(xs[hi]))
    ++hi;
  auto x0 = static_cast<double>(xs[hi - 1]);
  auto x1 = static_cast<double>(xs[hi]);
  double y = ys[hi - 1] + (ys[hi] - ys[hi - 1]) * (x - x0) / (x1 - x0);
  return y < 0.0 ? 0.0 : y;
}

} // namespace

double layer_profile::forward_time(double batch) const {
  return batch <= 0.0 ? 0.0 : interpolate(batch_sizes, forward_s, batch);
}

double layer_profile::backward_time(double batch) const {
  return batch <= 0.0 ? 0.0 : interpolate(batch_sizes, backward_s, batch);
}

double model_profile::step_time(double batch) const {
  double t = 0;
  for (const auto& l : layers)
    t += l.forward_time(batch) + l.backward_time(batch);
  return t;
}

} // namespace asteroid::planner
