// A test that hangs is killed by CTest at its TIMEOUT with nothing to say
// where it hung. This listener arms a deadline for every test case, a little
// before that timeout (CTest gives it in ASTEROID_TEST_TIMEOUT_S, see
// tests/CMakeLists.txt); a case still running then prints its name and every
// thread's stack (with gdb, where the machine has it) and aborts, so the
// failure carries the evidence. Without the variable (a test binary run by
// hand) nothing is armed.
#define CATCH_CONFIG_EXTERNAL_INTERFACES
#include <catch2/catch.hpp>

#include <sys/prctl.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

namespace {

using clock_type = std::chrono::steady_clock;

/// Seconds before CTest's timeout: time for gdb to attach and print.
constexpr int margin_s = 30;

class watchdog {
public:
  /// The process-wide one, never destroyed: its thread may still wait when
  /// static objects are torn down at exit.
  static watchdog& instance() {
    static auto* w = new watchdog;
    return *w;
  }

  void arm(const std::string& test) {
    if (limit_s_ <= 0)
      return;
    std::lock_guard<std::mutex> lock{mu_};
    test_ = test;
    deadline_ = clock_type::now() + std::chrono::seconds(limit_s_);
    armed_ = true;
    if (!thread_started_) {
      thread_started_ = true;
      std::thread([this] { watch(); }).detach();
    }
    wake_.notify_all();
  }

  void disarm() {
    std::lock_guard<std::mutex> lock{mu_};
    armed_ = false;
    wake_.notify_all();
  }

private:
  watchdog() {
    if (const char* t = std::getenv("ASTEROID_TEST_TIMEOUT_S"))
      limit_s_ = std::atoi(t) - margin_s;
  }

  void watch() {
    std::unique_lock<std::mutex> lock{mu_};
    for (;;) {
      if (!armed_) {
        wake_.wait(lock);
        continue;
      }
      if (wake_.wait_until(lock, deadline_) == std::cv_status::timeout && armed_
          && clock_type::now() >= deadline_)
        break;
    }
    std::fprintf(stderr,
                 "\nwatchdog: test case '%s' still running after %d s (CTest "
                 "stops it %d s later); the stacks of every thread follow\n",
                 test_.c_str(), limit_s_, margin_s);
    std::fflush(stderr);
    // gdb attaches as a child of this process; where Yama restricts ptrace
    // to ancestors, this lets it.
    prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
    auto command = "command -v gdb >/dev/null && timeout " + std::to_string(margin_s - 5)
                   + " gdb -p " + std::to_string(getpid())
                   + " -batch -nx -ex 'thread apply all bt' 1>&2"
                   + " || echo 'watchdog: no gdb here: no stacks' 1>&2";
    if (std::system(command.c_str()) != 0)
      std::fprintf(stderr, "watchdog: taking the stacks failed\n");
    // Not through Catch's own SIGABRT handler: reporting from this thread
    // while the test's thread still runs, it ended the program only when
    // the test did.
    std::signal(SIGABRT, SIG_DFL);
    std::abort();
  }

  std::mutex mu_;
  std::condition_variable wake_;
  std::string test_;
  clock_type::time_point deadline_;
  bool armed_ = false;
  bool thread_started_ = false;
  int limit_s_ = 0;
};

struct watchdog_listener : Catch::TestEventListenerBase {
  using TestEventListenerBase::TestEventListenerBase;
  void testCaseStarting(const Catch::TestCaseInfo& info) override {
    watchdog::instance().arm(info.name);
  }
  void testCaseEnded(const Catch::TestCaseStats&) override {
    watchdog::instance().disarm();
  }
};

} // namespace

CATCH_REGISTER_LISTENER(watchdog_listener)
