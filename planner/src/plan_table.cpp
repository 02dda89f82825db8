#include "asteroid/planner/plan_table.hpp"

#include <cstdio>
#include <sstream>

#include "asteroid/planner/cost_model.hpp"
#include "asteroid/planner/json_io.hpp"

namespace asteroid::planner {

std::string format_plan_table(const plan& in, const model_profile& profile, const cluster& c) {
  plan p = in;
  evaluate(p, profile, c);
  std::ostringstream out;
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "plan by %s: model %s, cluster %s, batch %lld = %d micro-batches x %lld, %d "
                "stage(s)\n",
                p.planner.empty() ? "?" : p.planner.c_str(), profile.model.c_str(),
                c.name.empty() ? "?" : c.name.c_str(), static_cast<long long>(p.batch_size),
                p.micro_batches, static_cast<long long>(p.micro_batch_size()), p.num_stages());
  out << buf;
  auto steps = make_steps(p, profile, c);
  for (int s = 0; s < p.num_stages(); ++s) {
    const auto& st = p.stages[s];
    const auto& step = steps.steps[2 * s];
    std::string first = profile.layers[st.first_layer].name;
    std::string last = profile.layers[st.end_layer - 1].name;
    std::snprintf(buf, sizeof(buf),
                  "stage %d: layers %d-%d (%s .. %s), fwd %.2f ms, bwd %.2f ms, all-reduce %.2f "
                  "ms",
                  s, st.first_layer, st.end_layer - 1, first.c_str(), last.c_str(),
                  step.forward_s * 1e3, step.backward_s * 1e3, step.allreduce_s * 1e3);
    out << buf;
    // Profiles without measured update times keep the line they had.
    if (step.update_s > 0) {
      std::snprintf(buf, sizeof(buf), ", update %.2f ms", step.update_s * 1e3);
      out << buf;
    }
    out << " per round\n";
    std::snprintf(buf, sizeof(buf), "  %-16s %-12s %6s %6s %10s %12s %12s %6s\n", "device", "type",
                  "speed", "share", "fwd+bwd ms", "memory", "budget", "use");
    out << buf;
    for (size_t i = 0; i < st.devices.size(); ++i) {
      int d = st.devices[i];
      const auto& dev = c.devices[d];
      auto mem = p.predicted_memory_bytes[d];
      std::snprintf(buf, sizeof(buf), "  %-16s %-12s %6.2f %6lld %10.2f %12s %12s %5.0f%%%s\n",
                    dev.name.c_str(), dev.type.c_str(), dev.speed,
                    static_cast<long long>(st.shares[i]),
                    (step.device_forward_s[i] + step.device_backward_s[i]) * 1e3,
                    format_bytes(mem).c_str(), format_bytes(dev.memory_bytes).c_str(),
                    dev.memory_bytes > 0 ? 100.0 * static_cast<double>(mem) /
                                             static_cast<double>(dev.memory_bytes)
                                         : 0.0,
                    mem > dev.memory_bytes ? "  OVER BUDGET" : "");
      out << buf;
    }
    if (s + 1 < p.num_stages()) {
      const auto& comm = steps.steps[2 * s + 1];
      std::snprintf(buf, sizeof(buf), "  -> send %s per micro-batch: fwd %.2f ms, bwd %.2f ms\n",
                    format_bytes(static_cast<int64_t>(
                                   profile.layers[st.end_layer - 1].output_bytes_per_sample *
                                   p.micro_batch_size()))
                      .c_str(),
                    comm.forward_s * 1e3, comm.backward_s * 1e3);
      out << buf;
    }
  }
  std::vector<std::string> idle;
  for (int d = 0; d < c.size(); ++d) {
    bool used = false;
    for (const auto& st : p.stages)
      for (int x : st.devices)
        used = used || x == d;
    if (!used)
      idle.push_back(c.devices[d].name);
  }
  if (!idle.empty()) {
    out << "idle devices:";
    for (const auto& n : idle)
      out << ' ' << n;
    out << '\n';
  }
  std::snprintf(buf, sizeof(buf), "predicted: %.3f s per round, %.2f samples/s\n",
                p.predicted_round_s, p.predicted_samples_per_s);
  out << buf;
  if (p.simulated_round_s > 0) {
    std::snprintf(buf, sizeof(buf),
                  "1F1B schedule simulated: %.3f s per round, %.2f samples/s\n",
                  p.simulated_round_s, p.simulated_samples_per_s);
    out << buf;
  }
  return out.str();
}

} // namespace asteroid::planner
