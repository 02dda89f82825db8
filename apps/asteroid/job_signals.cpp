#include "job_signals.hpp"

#include "commands.hpp"

#include "asteroid/actors/exit_cleanup.hpp"
#include "asteroid/actors/serve.hpp"

#include <atomic>
#include <csignal>
#include <cstdio>
#include <string>
#include <unistd.h>

namespace asteroid::apps {

namespace {

std::atomic<int> first_signal{0};
/// What the first signal stops (the job or the server), said on stderr.
std::atomic<const char*> stop_note{""};

extern "C" void on_job_signal(int sig) {
  // Only async-signal-safe calls here: a lock-free atomic, write, unlink,
  // rmdir, _exit.
  int none = 0;
  if (!first_signal.compare_exchange_strong(none, sig)) {
    // The second: at once. Nodes of `asteroid cluster` die with this
    // process (a parent-death signal); its throw-away credentials and log
    // folder go here, since no destructor runs after _exit.
    actors::remove_registered_paths();
    ::_exit(128 + sig);
  }
  const char* note = stop_note.load();
  size_t length = 0;
  while (note[length] != '\0')
    ++length;
  [[maybe_unused]] auto n = ::write(STDERR_FILENO, note, length);
}

const char* signal_name(int sig) {
  return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "a signal";
}

/// Installs on_job_signal for SIGINT and SIGTERM until it is destroyed.
class signal_scope {
public:
  explicit signal_scope(const char* note) {
    first_signal = 0;
    stop_note = note;
    old_int_ = std::signal(SIGINT, on_job_signal);
    old_term_ = std::signal(SIGTERM, on_job_signal);
  }
  ~signal_scope() {
    std::signal(SIGINT, old_int_);
    std::signal(SIGTERM, old_term_);
  }
  signal_scope(const signal_scope&) = delete;
  signal_scope& operator=(const signal_scope&) = delete;

private:
  void (*old_int_)(int) = SIG_DFL;
  void (*old_term_)(int) = SIG_DFL;
};

} // namespace

int run_job_with_signals(const actors::job_spec& job) {
  signal_scope signals{"\nasteroid: stopping the job after its running step (signal "
                       "again to quit at once)\n"};
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

int run_serve_with_signals(const actors::serve_spec& spec) {
  signal_scope signals{"\nasteroid: stopping the server; requests not answered yet fail "
                       "(signal again to quit at once)\n"};
  try {
    print_serve_result(actors::run_serve(spec, [] { return first_signal.load() != 0; }));
  } catch (const std::exception& e) {
    const int sig = first_signal.load();
    if (sig == 0)
      throw;
    std::printf("serve stopped by %s: %s\n", signal_name(sig), e.what());
    return 128 + sig;
  }
  return 0;
}

} // namespace asteroid::apps
