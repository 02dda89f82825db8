#include "asteroid/planner/simulator.hpp"

#include <algorithm>
#include <deque>
#include <map>
#include <queue>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>

namespace asteroid::planner {

namespace {

std::string owner(const instruction_stream& s) {
  return "s" + std::to_string(s.stage) + "r" + std::to_string(s.replica);
}

enum class direction { activation = 0, grad = 1 };

// A boundary message: (upstream stage, direction, micro-batch).
using message_key = std::tuple<int, direction, int>;

struct transfer {
  message_key key;
  int to_stage = 0;
  double duration = 0.0;
  int link = 0;
  op kind = op::send_activation;
};

struct link_state {
  bool busy = false;
  std::deque<int> queue; // transfers waiting, in ready order
  double busy_s = 0.0;
  int boundary = 0;
  int dir = -1;
};

struct stream_state {
  size_t pc = 0;
  double forward_s = 0.0;
  double backward_s = 0.0;
  double allreduce_s = 0.0;
  double update_s = 0.0; // added to every optimizer_step
  int device = -1;
  bool waiting = false; // blocked on a receive or the all-reduce
  int in_flight = 0;
  device_stats stats;
};

enum class event_type { resume, transfer_ready, transfer_done };

struct event {
  double time;
  long seq;
  event_type type;
  int index; // stream or transfer
  bool operator>(const event& o) const {
    return time != o.time ? time > o.time : seq > o.seq;
  }
};

class engine {
public:
  engine(const std::vector<instruction_stream>& streams,
         const pipeline_steps& steps, const simulator_options& opt)
      : streams_(streams), opt_(opt), state_(streams.size()) {
    int num_stages = 0;
    for (const auto& s : streams)
      num_stages = std::max(num_stages, s.stage + 1);
    by_stage_.resize(num_stages);
    arrived_.assign(num_stages, 0);
    for (size_t i = 0; i < streams.size(); ++i)
      by_stage_[streams[i].stage].push_back(static_cast<int>(i));
    bind_compute(steps);
    bind_links(steps, num_stages);
  }

  simulation_result run() {
    for (size_t i = 0; i < streams_.size(); ++i)
      push(0.0, event_type::resume, static_cast<int>(i));
    while (!queue_.empty()) {
      event e = queue_.top();
      queue_.pop();
      now_ = e.time;
      switch (e.type) {
        case event_type::resume: run_stream(e.index); break;
        case event_type::transfer_ready: enqueue_transfer(e.index); break;
        case event_type::transfer_done: finish_transfer(e.index); break;
      }
    }
    std::string stuck;
    for (size_t i = 0; i < streams_.size(); ++i) {
      const auto& st = state_[i];
      if (st.pc < streams_[i].instructions.size())
        stuck += (stuck.empty() ? "" : "; ") + owner(streams_[i]) +
                 " waits at " + std::to_string(st.pc) + " (" +
                 to_string(streams_[i].instructions[st.pc]) + ")";
    }
    if (!stuck.empty())
      throw std::runtime_error("simulate: deadlock: " + stuck);
    return result();
  }

private:
  void push(double t, event_type type, int index) {
    queue_.push({t, seq_++, type, index});
  }

  const pipeline_step* find_step(const pipeline_steps& steps,
                                 pipeline_step::kind k, int stage) const {
    for (const auto& s : steps.steps)
      if (s.type == k && s.stage == stage)
        return &s;
    return nullptr;
  }

  void bind_compute(const pipeline_steps& steps) {
    for (size_t i = 0; i < streams_.size(); ++i) {
      const auto& s = streams_[i];
      const auto* step = find_step(steps, pipeline_step::kind::compute, s.stage);
      if (!step)
        throw std::invalid_argument("simulate: no compute step for stage " +
                                    std::to_string(s.stage));
      auto& st = state_[i];
      size_t r = static_cast<size_t>(s.replica);
      size_t replicas = by_stage_[s.stage].size();
      auto pick = [&](const std::vector<double>& per_device, double whole,
                      const char* what) {
        if (per_device.empty())
          return whole;
        if (per_device.size() != replicas || r >= per_device.size())
          throw std::invalid_argument(
              "simulate: compute step of stage " + std::to_string(s.stage) +
              " has " + std::to_string(per_device.size()) + " " + what +
              " times but the stage has " + std::to_string(replicas) +
              " replicas");
        return per_device[r];
      };
      st.forward_s = pick(step->device_forward_s, step->forward_s, "forward");
      st.backward_s =
          pick(step->device_backward_s, step->backward_s, "backward");
      st.allreduce_s = step->allreduce_s;
      st.update_s = pick(step->device_update_s, step->update_s, "update");
      st.device = s.device;
      if (!step->devices.empty() && r < step->devices.size()) {
        if (st.device < 0)
          st.device = step->devices[r];
        else if (st.device != step->devices[r])
          throw std::invalid_argument(
              "simulate: " + owner(s) + " runs on device " +
              std::to_string(st.device) + " but the compute step of stage " +
              std::to_string(s.stage) + " lists device " +
              std::to_string(step->devices[r]));
      }
      st.stats.stage = s.stage;
      st.stats.replica = s.replica;
      st.stats.device = st.device;
    }
  }

  void bind_links(const pipeline_steps& steps, int num_stages) {
    for (int b = 0; b + 1 < num_stages; ++b) {
      const auto* step =
          find_step(steps, pipeline_step::kind::communication, b);
      comm_.push_back(step);
      int per_boundary = opt_.links == link_model::half_duplex ? 1 : 2;
      for (int d = 0; d < per_boundary; ++d) {
        link_state l;
        l.boundary = b;
        l.dir = per_boundary == 1 ? -1 : d;
        links_.push_back(l);
      }
    }
  }

  int link_index(int boundary, direction dir) const {
    return opt_.links == link_model::half_duplex
               ? boundary
               : 2 * boundary + static_cast<int>(dir);
  }

  void record(sim_event e) {
    if (opt_.record_events)
      events_.push_back(e);
  }

  void record_device(int i, op kind, int mb, double start, double end) {
    const auto& s = streams_[i];
    record({sim_event::resource::device, s.stage, s.replica, state_[i].device,
            kind, mb, -1, start, end});
  }

  // Runs stream i from `now_` until it blocks or starts a timed instruction.
  void run_stream(int i) {
    auto& st = state_[i];
    const auto& s = streams_[i];
    st.waiting = false;
    while (st.pc < s.instructions.size()) {
      const auto& in = s.instructions[st.pc];
      switch (in.kind) {
        case op::load_micro_batch:
        case op::forward:
        case op::backward:
        case op::optimizer_step: {
          double d = in.kind == op::forward    ? st.forward_s
                     : in.kind == op::backward ? st.backward_s
                     : in.kind == op::load_micro_batch ? opt_.load_s
                                                       : opt_.optimizer_s + st.update_s;
          if (in.kind == op::forward)
            st.stats.peak_in_flight =
                std::max(st.stats.peak_in_flight, ++st.in_flight);
          if (in.kind == op::backward)
            --st.in_flight;
          record_device(i, in.kind, in.micro_batch, now_, now_ + d);
          st.stats.busy_s += d;
          st.stats.finish_s = now_ + d;
          ++st.pc;
          push(now_ + d, event_type::resume, i);
          return;
        }
        case op::send_activation:
        case op::send_grad:
          send(i, in);
          ++st.pc;
          break;
        case op::recv_activation:
        case op::recv_grad: {
          auto dir = in.kind == op::recv_activation ? direction::activation
                                                    : direction::grad;
          int upstream = dir == direction::activation ? in.peer_stage : s.stage;
          message_key key{upstream, dir, in.micro_batch};
          if (!delivered_.count(key)) {
            st.waiting = true;
            waiters_[key].push_back(i);
            return;
          }
          ++st.pc;
          break;
        }
        case op::all_reduce: {
          // The group's streams block here until the last one arrives.
          if (++arrived_[s.stage] < static_cast<int>(by_stage_[s.stage].size())) {
            st.waiting = true;
            return;
          }
          for (int j : by_stage_[s.stage]) {
            auto& sj = state_[j];
            double d = sj.allreduce_s;
            record_device(j, op::all_reduce, -1, now_, now_ + d);
            sj.stats.allreduce_s += d;
            sj.stats.finish_s = now_ + d;
            ++sj.pc;
            push(now_ + d, event_type::resume, j);
          }
          return;
        }
      }
    }
  }

  void send(int i, const instruction& in) {
    const auto& s = streams_[i];
    auto dir = in.kind == op::send_activation ? direction::activation
                                              : direction::grad;
    int upstream = dir == direction::activation ? s.stage : in.peer_stage;
    message_key key{upstream, dir, in.micro_batch};
    // The boundary message is the merge of every replica's share.
    if (++sent_[key] < static_cast<int>(by_stage_[s.stage].size()))
      return;
    if (upstream < 0 || upstream >= static_cast<int>(comm_.size()))
      throw std::invalid_argument("simulate: " + owner(s) + " sends to stage " +
                                  std::to_string(in.peer_stage) +
                                  ", which does not exist");
    const auto* step = comm_[upstream];
    if (!step)
      throw std::invalid_argument(
          "simulate: no communication step for the boundary between stages " +
          std::to_string(upstream) + " and " + std::to_string(upstream + 1));
    transfer t;
    t.key = key;
    t.to_stage = in.peer_stage;
    t.duration = dir == direction::activation ? step->forward_s
                                              : step->backward_s;
    t.link = link_index(upstream, dir);
    t.kind = in.kind;
    transfers_.push_back(t);
    push(now_, event_type::transfer_ready,
         static_cast<int>(transfers_.size()) - 1);
  }

  void start_transfer(int id) {
    auto& t = transfers_[id];
    auto& l = links_[t.link];
    l.busy = true;
    l.busy_s += t.duration;
    auto [upstream, dir, mb] = t.key;
    (void)dir;
    record({sim_event::resource::link, upstream, -1, -1, t.kind, mb, t.to_stage,
            now_, now_ + t.duration});
    push(now_ + t.duration, event_type::transfer_done, id);
  }

  void enqueue_transfer(int id) {
    auto& l = links_[transfers_[id].link];
    if (l.busy)
      l.queue.push_back(id);
    else
      start_transfer(id);
  }

  void finish_transfer(int id) {
    const auto& t = transfers_[id];
    last_transfer_end_ = std::max(last_transfer_end_, now_);
    delivered_.insert(t.key);
    auto it = waiters_.find(t.key);
    if (it != waiters_.end()) {
      for (int i : it->second)
        push(now_, event_type::resume, i);
      waiters_.erase(it);
    }
    auto& l = links_[t.link];
    l.busy = false;
    if (!l.queue.empty()) {
      int next = l.queue.front();
      l.queue.pop_front();
      start_transfer(next);
    }
  }

  simulation_result result() {
    simulation_result r;
    r.round_s = last_transfer_end_;
    for (const auto& st : state_)
      r.round_s = std::max(r.round_s, st.stats.finish_s);
    double used = 0.0;
    for (auto& st : state_) {
      st.stats.utilisation = r.round_s > 0 ? st.stats.busy_s / r.round_s : 0.0;
      used += st.stats.busy_s + st.stats.allreduce_s;
      r.devices.push_back(st.stats);
    }
    double capacity = r.round_s * static_cast<double>(state_.size());
    r.bubble_fraction = capacity > 0 ? 1.0 - used / capacity : 0.0;
    for (const auto& l : links_)
      r.links.push_back({l.boundary, l.dir, l.busy_s,
                         r.round_s > 0 ? l.busy_s / r.round_s : 0.0});
    std::stable_sort(events_.begin(), events_.end(),
                     [](const sim_event& a, const sim_event& b) {
                       return a.start_s < b.start_s;
                     });
    r.events = std::move(events_);
    return r;
  }

  const std::vector<instruction_stream>& streams_;
  simulator_options opt_;
  std::vector<stream_state> state_;
  std::vector<std::vector<int>> by_stage_;
  std::vector<int> arrived_;
  std::vector<const pipeline_step*> comm_;
  std::vector<link_state> links_;
  std::vector<transfer> transfers_;
  std::map<message_key, int> sent_;
  std::set<message_key> delivered_;
  std::map<message_key, std::vector<int>> waiters_;
  std::priority_queue<event, std::vector<event>, std::greater<event>> queue_;
  std::vector<sim_event> events_;
  double now_ = 0.0;
  double last_transfer_end_ = 0.0;
  long seq_ = 0;
};

} // namespace

simulation_result simulate(const std::vector<instruction_stream>& streams,
                           const pipeline_steps& steps,
                           const simulator_options& options) {
  if (streams.empty())
    throw std::invalid_argument("simulate: no streams");
  for (const auto& s : streams)
    if (s.stage < 0 || s.replica < 0)
      throw std::invalid_argument("simulate: " + owner(s) +
                                  ": negative stage or replica");
  return engine(streams, steps, options).run();
}

simulation_result simulate(const plan& p, const pipeline_steps& steps,
                           schedule_kind kind,
                           const simulator_options& options) {
  if (steps.micro_batches != p.micro_batches)
    throw std::invalid_argument(
        "simulate: plan has " + std::to_string(p.micro_batches) +
        " micro-batches but the steps were made for " +
        std::to_string(steps.micro_batches));
  return simulate(compile_schedule(p, kind), steps, options);
}

} // namespace asteroid::planner
