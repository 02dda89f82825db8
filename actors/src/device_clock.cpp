#include "device_clock.hpp"

#include "asteroid/kernels/compute_device.hpp"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <thread>

#include <sys/resource.h>

namespace asteroid::actors::detail {

namespace {

/// CPU time of the calling thread, in seconds.
double thread_cpu_s() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

/// What slowed a compute besides the work itself, for the trace: the calling
/// thread's system time, page faults and involuntary context switches. Read
/// with getrusage, whose times are only microseconds; the padding keeps using
/// thread_cpu_s.
struct thread_interference {
  double sys_ms = 0;
  long minflt = 0;
  long nivcsw = 0;

  static thread_interference now() {
    rusage ru{};
    ::getrusage(RUSAGE_THREAD, &ru);
    return {static_cast<double>(ru.ru_stime.tv_sec) * 1e3
              + static_cast<double>(ru.ru_stime.tv_usec) * 1e-3,
            ru.ru_minflt, ru.ru_nivcsw};
  }
};

} // namespace

double wall_us() {
  return std::chrono::duration<double, std::micro>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

/// The emulated time is `slowdown` × the thread's CPU time when LibTorch
/// computes on this one thread (nodes default to `--threads 1`), else × the
/// wall time. CPU time, because emulated devices share this machine's cores:
/// while another node's process held the core this thread was not computing,
/// a separate device would not have lost that time, and padding a multiple of
/// it would stretch the host's contention `slowdown` times (the pipelines of
/// throughput_bench computed on a core 46-72 % of their wall time). Where the
/// compute already took longer than the emulated time (an overloaded host),
/// nothing is padded and the excess is reported as `overrun_s`: the
/// emulation was slower than the device it stands for. `busy_s` adds up the
/// device's time (the emulated one), the trace shows the time the host took.
/// Without emulation the time is the wall time: a real device that another
/// program slows down is slower, and drift detection must see it. With the
/// job's `compute_time` "profile" the emulated time is `slowdown` × the
/// profile's time of the pass instead, the same in every run.
device_time run_emulated(double slowdown, const std::function<void()>& work,
                         const std::function<bool()>& abandon, double profiled_s) {
  const bool own_core = at::get_num_threads() == 1;
  auto t0 = std::chrono::steady_clock::now();
  auto cpu0 = thread_cpu_s();
  work();
  device_time t;
  t.cpu_s = thread_cpu_s() - cpu0;
  t.host_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
               .count();
  t.device_s = t.host_s; // what the device took
  // From the profile, the device's time does not move with the host's speed
  // (which swung 1.3-1.6x within minutes on the 2-core development machine).
  const bool from_profile = profiled_s >= 0;
  if (slowdown > 1.0 || from_profile) {
    t.device_s = slowdown * (from_profile ? profiled_s : own_core ? t.cpu_s : t.host_s);
    if (t.device_s >= t.host_s) {
      // In slices, so that work nobody will use (a replica a recovery
      // halts) does not sleep out its emulated time.
      auto until = t0 + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                          std::chrono::duration<double>(t.device_s));
      while (!abandon || !abandon()) {
        auto left = until - std::chrono::steady_clock::now();
        if (left <= std::chrono::steady_clock::duration::zero())
          break;
        std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
          left, std::chrono::milliseconds(5)));
      }
    } else
      t.overrun_s = t.host_s - t.device_s;
  }
  return t;
}

void compute(replica_self* self, const std::string& name,
             const std::function<void()>& work, double profiled_s) {
  auto& st = self->state;
  const bool traced = st.e->spec.trace_steps < 0 || st.step < st.e->spec.trace_steps;
  auto start_us = wall_us();
  auto in0 = traced ? thread_interference::now() : thread_interference{};
  // On CUDA the work only queues kernels: waiting for them makes the time
  // the device's, and an error in them this compute's.
  auto t = run_emulated(st.e->spec.slowdown,
                        [&] {
                          work();
                          kernels::synchronize(st.e->device);
                        },
                        [&] { return superseded(*st.e); }, profiled_s);
  st.overrun_s += t.overrun_s;
  st.busy_s += t.device_s;
  if (!traced)
    return;
  auto in1 = thread_interference::now();
  st.events.push_back({{"name", name}, {"ts", start_us},
                       {"dur", std::max(t.host_s, t.device_s) * 1e6},
                       {"wall_ms", t.host_s * 1e3}, {"cpu_ms", t.cpu_s * 1e3},
                       {"minflt", in1.minflt - in0.minflt},
                       {"nivcsw", in1.nivcsw - in0.nivcsw},
                       {"sys_ms", in1.sys_ms - in0.sys_ms}});
}

} // namespace asteroid::actors::detail
