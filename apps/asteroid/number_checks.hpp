#pragma once
// Checks of numeric command-line values. CLI11 2.1's PositiveNumber,
// NonNegativeNumber and Range compare the parsed value with their bounds,
// and every comparison with NaN is false: `--lr nan` and `--momentum nan`
// passed them. These refuse anything that is not a finite number inside the
// bounds (infinities too, which CLI11's own checks already refused), naming
// the bounds.
#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <sstream>
#include <string>

namespace asteroid::apps {

/// A finite number x in [lo, hi]; the bound is open on the side `lo_open`
/// or `hi_open` names. `hi` = the largest double reads as no upper bound.
inline CLI::Validator finite_number(double lo, double hi, bool lo_open = false,
                                    bool hi_open = false) {
  std::ostringstream bounds;
  if (hi == std::numeric_limits<double>::max())
    bounds << (lo_open ? "> " : ">= ") << lo;
  else
    bounds << "in " << (lo_open ? "(" : "[") << lo << ", " << hi << (hi_open ? ")" : "]");
  const std::string what = "a finite number " + bounds.str();
  return CLI::Validator(
    [=](std::string& text) -> std::string {
      const char* begin = text.c_str();
      char* end = nullptr;
      const double x = std::strtod(begin, &end);
      const bool parsed = end != begin && *end == '\0';
      const bool inside = (lo_open ? x > lo : x >= lo) && (hi_open ? x < hi : x <= hi);
      if (parsed && std::isfinite(x) && inside)
        return {};
      return "Value " + text + " is not " + what;
    },
    what.substr(2));
}

/// A finite number > 0.
inline CLI::Validator positive_finite() {
  return finite_number(0, std::numeric_limits<double>::max(), true);
}

/// A finite number >= 0.
inline CLI::Validator non_negative_finite() {
  return finite_number(0, std::numeric_limits<double>::max());
}

} // namespace asteroid::apps
