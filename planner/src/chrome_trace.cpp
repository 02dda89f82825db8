#include "asteroid/planner/chrome_trace.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <stdexcept>

namespace asteroid::planner {

namespace {

nlohmann::json arg_json(const trace_arg& arg) {
  return std::visit([](const auto& v) { return nlohmann::json(v); }, arg);
}

nlohmann::json metadata(const char* what, int pid, int tid,
                        const std::string& name) {
  return {{"name", what}, {"ph", "M"}, {"pid", pid}, {"tid", tid},
          {"args", {{"name", name}}}};
}

const char* category_of(op kind) {
  switch (kind) {
    case op::forward:
    case op::backward: return "compute";
    case op::load_micro_batch: return "load";
    case op::all_reduce: return "allreduce";
    case op::optimizer_step: return "optimizer";
    default: return "comm";
  }
}

} // namespace

nlohmann::json to_json(const chrome_trace& trace) {
  auto events = nlohmann::json::array();
  for (const auto& [pid, name] : trace.process_names)
    events.push_back(metadata("process_name", pid, 0, name));
  for (const auto& [ids, name] : trace.thread_names)
    events.push_back(metadata("thread_name", ids.first, ids.second, name));
  for (const auto& e : trace.events) {
    nlohmann::json args = nlohmann::json::object();
    for (const auto& [key, value] : e.args)
      args[key] = arg_json(value);
    events.push_back({{"name", e.name},
                      {"cat", e.category},
                      {"ph", "X"},
                      {"ts", e.start_us},
                      {"dur", e.dur_us},
                      {"pid", e.pid},
                      {"tid", e.tid},
                      {"args", std::move(args)}});
  }
  return {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
}

void write_chrome_trace(const chrome_trace& trace, std::ostream& out) {
  out << to_json(trace).dump() << '\n';
}

void write_chrome_trace(const chrome_trace& trace, const std::string& path) {
  std::ofstream out(path);
  if (!out)
    throw std::runtime_error("chrome trace: cannot open '" + path +
                             "' for writing");
  write_chrome_trace(trace, out);
  out.flush();
  if (!out)
    throw std::runtime_error("chrome trace: error writing '" + path + "'");
}

chrome_trace trace_from_simulation(const simulation_result& result,
                                   const std::vector<std::string>& names) {
  chrome_trace trace;
  // Unbound streams (device -1) get a row per stage instead.
  auto pid_of = [](const sim_event& e) {
    return e.device >= 0 ? e.device : e.stage;
  };
  int link_base = 0;
  for (const auto& d : result.devices)
    link_base = std::max(link_base, (d.device >= 0 ? d.device : d.stage) + 1);
  for (const auto& d : result.devices) {
    int pid = d.device >= 0 ? d.device : d.stage;
    trace.process_names[pid] =
        d.device >= 0 && static_cast<size_t>(d.device) < names.size()
            ? names[d.device]
            : (d.device >= 0 ? "device " : "stage ") + std::to_string(pid);
    trace.thread_names[{pid, 100 * d.stage + d.replica}] =
        "s" + std::to_string(d.stage) + "r" + std::to_string(d.replica);
  }
  for (const auto& e : result.events) {
    if (e.end_s <= e.start_s)
      continue;
    trace_event t;
    t.start_us = e.start_s * 1e6;
    t.dur_us = (e.end_s - e.start_s) * 1e6;
    t.args["stage"] = int64_t{e.stage};
    if (e.micro_batch >= 0)
      t.args["micro_batch"] = int64_t{e.micro_batch};
    if (e.where == sim_event::resource::device) {
      t.name = to_string(instruction{e.kind, e.micro_batch, -1});
      t.category = category_of(e.kind);
      t.pid = pid_of(e);
      t.tid = 100 * e.stage + e.replica;
      t.args["replica"] = int64_t{e.replica};
    } else {
      bool act = e.kind == op::send_activation;
      int boundary = e.stage;
      t.name = std::string(act ? "ACT" : "GRAD") + " mb=" +
               std::to_string(e.micro_batch);
      t.category = "comm";
      t.pid = link_base + boundary;
      t.tid = act ? 0 : 1;
      t.args["to_stage"] = int64_t{e.peer_stage};
      auto b = std::to_string(boundary), n = std::to_string(boundary + 1);
      trace.process_names[t.pid] = "link s" + b + "-s" + n;
      trace.thread_names[{t.pid, t.tid}] =
          act ? "activations s" + b + "->s" + n : "gradients s" + n + "->s" + b;
    }
    trace.events.push_back(std::move(t));
  }
  return trace;
}

} // namespace asteroid::planner
