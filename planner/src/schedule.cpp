#include "asteroid/planner/schedule.hpp"

#include <algorithm>
#include <map>
#include <sstream>
#include <stdexcept>

namespace asteroid::planner {

namespace {

void check_shape(int stage, int num_stages, int micro_batches) {
  if (num_stages < 1 || stage < 0 || stage >= num_stages || micro_batches < 1)
    throw std::invalid_argument(
        "schedule: invalid shape stage=" + std::to_string(stage) +
        " num_stages=" + std::to_string(num_stages) +
        " micro_batches=" + std::to_string(micro_batches));
}

// The instructions around one micro-batch's forward on `stage`: inputs are
// loaded on the first stage, labels on the last one (DeepSpeed does the
// same); loading first lets a runtime prefetch while the receive waits.
void append_forward(std::vector<instruction>& out, int stage, int num_stages,
                    int mb) {
  bool first = stage == 0;
  bool last = stage == num_stages - 1;
  if (first || last)
    out.push_back({op::load_micro_batch, mb, -1});
  if (!first)
    out.push_back({op::recv_activation, mb, stage - 1});
  out.push_back({op::forward, mb, -1});
  if (!last)
    out.push_back({op::send_activation, mb, stage + 1});
}

void append_backward(std::vector<instruction>& out, int stage, int num_stages,
                     int mb) {
  if (stage != num_stages - 1)
    out.push_back({op::recv_grad, mb, stage + 1});
  out.push_back({op::backward, mb, -1});
  if (stage != 0)
    out.push_back({op::send_grad, mb, stage - 1});
}

void append_epilogue(std::vector<instruction>& out) {
  out.push_back({op::all_reduce, -1, -1});
  out.push_back({op::optimizer_step, -1, -1});
}

struct registry {
  std::map<std::string, std::shared_ptr<const schedule>> by_name;

  registry() {
    add(std::make_shared<one_f_one_b_schedule>());
    add(std::make_shared<gpipe_schedule>());
  }
  void add(std::shared_ptr<const schedule> s) {
    auto key = s->name();
    by_name[key] = std::move(s);
  }
};

registry& the_registry() {
  static registry instance;
  return instance;
}

std::string known_names() {
  std::string out;
  for (const auto& name : schedule_names())
    out += (out.empty() ? "" : ", ") + name;
  return out;
}

} // namespace

std::string to_string(schedule_kind kind) {
  switch (kind) {
    case schedule_kind::one_f_one_b: return "1f1b";
    case schedule_kind::gpipe: return "gpipe";
  }
  return "?";
}

schedule_kind parse_schedule_kind(const std::string& name) {
  if (name == "1f1b")
    return schedule_kind::one_f_one_b;
  if (name == "gpipe")
    return schedule_kind::gpipe;
  throw std::invalid_argument("unknown schedule '" + name +
                              "' (built-in: 1f1b, gpipe)");
}

std::string one_f_one_b_schedule::name() const { return "1f1b"; }

std::vector<instruction> one_f_one_b_schedule::stream(int stage,
                                                      int num_stages,
                                                      int micro_batches) const {
  check_shape(stage, num_stages, micro_batches);
  std::vector<instruction> out;
  // Warm-up fills the pipeline below this stage: the first gradient comes
  // back only after P-s-1 more stages ran the first micro-batch.
  int warmup = std::min(num_stages - stage - 1, micro_batches);
  int steady = micro_batches - warmup;
  for (int mb = 0; mb < warmup; ++mb)
    append_forward(out, stage, num_stages, mb);
  for (int i = 0; i < steady; ++i) {
    append_forward(out, stage, num_stages, warmup + i);
    append_backward(out, stage, num_stages, i);
  }
  for (int mb = steady; mb < micro_batches; ++mb)
    append_backward(out, stage, num_stages, mb);
  append_epilogue(out);
  return out;
}

std::string gpipe_schedule::name() const { return "gpipe"; }

std::vector<instruction> gpipe_schedule::stream(int stage, int num_stages,
                                                int micro_batches) const {
  check_shape(stage, num_stages, micro_batches);
  std::vector<instruction> out;
  for (int mb = 0; mb < micro_batches; ++mb)
    append_forward(out, stage, num_stages, mb);
  // Reverse order as in GPipe/torchgpipe: the last forward's activations are
  // the freshest, and the last stage can turn around without waiting.
  for (int mb = micro_batches - 1; mb >= 0; --mb)
    append_backward(out, stage, num_stages, mb);
  append_epilogue(out);
  return out;
}

const schedule& find_schedule(const std::string& name) {
  auto& reg = the_registry();
  auto it = reg.by_name.find(name);
  if (it == reg.by_name.end())
    throw std::invalid_argument("unknown schedule '" + name + "' (known: " +
                                known_names() + ")");
  return *it->second;
}

const schedule& find_schedule(schedule_kind kind) {
  return find_schedule(to_string(kind));
}

void register_schedule(std::shared_ptr<const schedule> sched) {
  if (!sched)
    throw std::invalid_argument("register_schedule: null schedule");
  // Replacing would leave dangling the references find_schedule handed out.
  if (the_registry().by_name.count(sched->name()))
    throw std::invalid_argument("register_schedule: schedule '" +
                                sched->name() + "' is already registered");
  the_registry().add(std::move(sched));
}

std::vector<std::string> schedule_names() {
  std::vector<std::string> out;
  for (const auto& entry : the_registry().by_name)
    out.push_back(entry.first);
  return out; // std::map keeps them sorted
}

std::vector<instruction_stream> compile_schedule(const plan& p,
                                                 const schedule& sched) {
  if (p.stages.empty())
    throw std::invalid_argument("compile_schedule: plan has no stages");
  if (p.micro_batches < 1)
    throw std::invalid_argument("compile_schedule: plan has micro_batches=" +
                                std::to_string(p.micro_batches));
  std::vector<instruction_stream> out;
  int num_stages = p.num_stages();
  for (int s = 0; s < num_stages; ++s) {
    const auto& st = p.stages[s];
    if (st.devices.empty())
      throw std::invalid_argument("compile_schedule: stage " +
                                  std::to_string(s) + " has no devices");
    auto instrs = sched.stream(s, num_stages, p.micro_batches);
    for (size_t r = 0; r < st.devices.size(); ++r)
      out.push_back({s, static_cast<int>(r), st.devices[r], instrs});
  }
  return out;
}

std::vector<instruction_stream> compile_schedule(const plan& p,
                                                 schedule_kind kind) {
  return compile_schedule(p, find_schedule(kind));
}

std::string format_schedule(const plan& p, const schedule& sched,
                            bool all_replicas) {
  auto streams = compile_schedule(p, sched);
  std::ostringstream out;
  out << "# schedule " << sched.name() << ": " << p.num_stages()
      << " stages, " << p.micro_batches << " micro-batches of "
      << p.micro_batch_size() << " samples\n";
  for (int s = 0; s < p.num_stages(); ++s) {
    const auto& st = p.stages[s];
    out << "# stage " << s << ": layers [" << st.first_layer << ", "
        << st.end_layer << "), replicas";
    for (size_t r = 0; r < st.devices.size(); ++r) {
      out << " r" << r << "=device " << st.devices[r];
      if (r < st.shares.size())
        out << " (" << st.shares[r] << " samples)";
      out << (r + 1 < st.devices.size() ? "," : "");
    }
    out << '\n';
  }
  for (const auto& stream : streams)
    if (stream.replica == 0)
      out << "# " << to_compact_string(stream) << '\n';
  for (const auto& stream : streams)
    if (all_replicas || stream.replica == 0)
      out << to_string(stream);
  return out.str();
}

std::string format_schedule(const plan& p, schedule_kind kind,
                            bool all_replicas) {
  return format_schedule(p, find_schedule(kind), all_replicas);
}

} // namespace asteroid::planner
