#pragma once
// The median of a benchmark's repeated measurements.
#include <algorithm>
#include <vector>

namespace asteroid::bench {

/// The middle value (the mean of the two middle ones for an even count);
/// 0 for none.
inline double median(std::vector<double> v) {
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end());
  const auto n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

} // namespace asteroid::bench
