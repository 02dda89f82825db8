#include "job_signals.hpp"

#include <atomic>
#include <csignal>
#include <cstdio>
#include <string>
#include <unistd.h>

namespace asteroid::apps {

namespace {

std::atomic<int> first_signal{0};

extern "C" void on_job_signal(int sig) {
  // Only async-signal-safe calls here: a lock-free atomic, write, _exit.
  int none = 0;
  if (!first_signal.compare_exchange_strong(none, sig))
    ::_exit(128 + sig); // the second: at once (nodes of `asteroid cluster`
                        // die with this process, a parent-death signal)
  static const char note[] = "\nasteroid: stopping the job after its running "
                             "step (signal again to quit at once)\n";
  [[maybe_unused]] auto n = ::write(STDERR_FILENO, note, sizeof note - 1);
}

const char* signal_name(int sig) {
  return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "a signal";
}

} // namespace

int run_job_with_signals(const actors::job_spec& job) {
  first_signal = 0;
  auto old_int = std::signal(SIGINT, on_job_signal);
  auto old_term = std::signal(SIGTERM, on_job_signal);
  struct restore {
    decltype(old_int) on_int, on_term;
    ~restore() {
      std::signal(SIGINT, on_int);
      std::signal(SIGTERM, on_term);
    }
  } restore_handlers{old_int, old_term};
  auto r = actors::run_job(job, [] { return first_signal.load() != 0; });
  char accuracy[32] = "not evaluated";
  if (r.test.samples > 0)
    std::snprintf(accuracy, sizeof accuracy, "%.2f%%", r.test.accuracy * 100);
  const int sig = r.stopped ? first_signal.load() : 0;
  auto head = r.stopped ? std::string("job stopped by ") + signal_name(sig) + " after"
                        : std::string("job done:");
  std::printf("%s %lld steps in %.1f s, %.1f samples/s, loss %.4f, test accuracy %s\n",
              head.c_str(), static_cast<long long>(r.steps), r.seconds,
              r.samples_per_s, r.last_loss, accuracy);
  return sig > 0 ? 128 + sig : 0;
}

} // namespace asteroid::apps
