#include "asteroid/planner/model_profile.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

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

layer_profile range_profile(const model_profile& p, int first, int end) {
  if (first < 0 || end > p.num_layers() || first >= end)
    throw std::invalid_argument("range_profile: layers " + std::to_string(first) + "-"
                                + std::to_string(end) + " of a profile of "
                                + std::to_string(p.num_layers()) + " layers");
  layer_profile out;
  out.name = "layers " + std::to_string(first) + "-" + std::to_string(end);
  for (int l = first; l < end; ++l)
    out.batch_sizes.insert(out.batch_sizes.end(), p.layers[l].batch_sizes.begin(),
                           p.layers[l].batch_sizes.end());
  std::sort(out.batch_sizes.begin(), out.batch_sizes.end());
  out.batch_sizes.erase(std::unique(out.batch_sizes.begin(), out.batch_sizes.end()),
                        out.batch_sizes.end());
  for (auto b : out.batch_sizes) {
    double f = 0, g = 0;
    for (int l = first; l < end; ++l) {
      f += p.layers[l].forward_time(static_cast<double>(b));
      g += p.layers[l].backward_time(static_cast<double>(b));
    }
    out.forward_s.push_back(f);
    out.backward_s.push_back(g);
  }
  for (int l = first; l < end; ++l) {
    const auto& x = p.layers[l];
    out.param_bytes += x.param_bytes;
    out.optimizer_state_bytes += x.optimizer_state_bytes;
    out.stashed_bytes_per_sample += x.stash_bytes_per_sample();
    out.optimizer_step_s += x.optimizer_step_s;
    out.working_bytes_per_sample = std::max(out.working_bytes_per_sample,
                                            x.working_bytes_per_sample);
  }
  out.output_bytes_per_sample = p.layers[end - 1].output_bytes_per_sample;
  return out;
}

} // namespace asteroid::planner
