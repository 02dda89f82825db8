#pragma once

#include <cstdint>
#include <string>

namespace asteroid::training {

/// A single self-overwriting status line on stderr: samples/s, loss, ETA.
///
/// Redraws at most a few times a second, so calling `update` every step costs
/// nothing measurable. Disabled lines do nothing.
class progress_line {
public:
  /// `mode`: -1 on only when stderr is a terminal, 0 off, 1 on.
  explicit progress_line(int mode);
  ~progress_line();

  /// `done` of `total` samples processed in this run so far.
  void update(const std::string& label, int64_t done, int64_t total,
              double samples_per_s, double loss);

  /// Ends the line (moves to a fresh one) if anything was drawn.
  void finish();

  bool enabled() const { return enabled_; }

  /// Formats seconds as H:MM:SS or M:SS.
  static std::string format_eta(double seconds);

private:
  bool enabled_;
  bool drawn_ = false;
  double last_draw_ = -1.0;
};

} // namespace asteroid::training
