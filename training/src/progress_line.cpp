#include "asteroid/training/progress_line.hpp"
#include "monotonic_seconds.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <unistd.h>

namespace asteroid::training {

progress_line::progress_line(int mode)
  : enabled_(mode > 0 || (mode < 0 && isatty(STDERR_FILENO) == 1)) {
  // nop
}

progress_line::~progress_line() {
  finish();
}

std::string progress_line::format_eta(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0)
    return "--:--";
  auto s = static_cast<long>(seconds + 0.5);
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof(buf), "%ld:%02ld:%02ld", s / 3600, s / 60 % 60,
                  s % 60);
  else
    std::snprintf(buf, sizeof(buf), "%ld:%02ld", s / 60, s % 60);
  return buf;
}

void progress_line::update(const std::string& label, int64_t done,
                           int64_t total, double samples_per_s, double loss) {
  if (!enabled_)
    return;
  auto now = detail::monotonic_seconds();
  if (done < total && last_draw_ >= 0 && now - last_draw_ < 0.2)
    return;
  last_draw_ = now;
  constexpr int width = 24;
  double frac = total > 0 ? static_cast<double>(done) / total : 1.0;
  int fill = static_cast<int>(frac * width);
  std::string bar(fill, '=');
  bar.resize(width, ' ');
  double eta = samples_per_s > 0 ? (total - done) / samples_per_s : NAN;
  std::fprintf(stderr,
               "\r%s [%s] %3.0f%% %lld/%lld  %.0f samples/s  loss %.4f  "
               "ETA %s   ",
               label.c_str(), bar.c_str(), frac * 100,
               static_cast<long long>(done), static_cast<long long>(total),
               samples_per_s, loss, format_eta(eta).c_str());
  std::fflush(stderr);
  drawn_ = true;
}

void progress_line::finish() {
  if (drawn_) {
    std::fputc('\n', stderr);
    drawn_ = false;
  }
}

} // namespace asteroid::training
