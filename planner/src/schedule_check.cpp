#include "asteroid/planner/schedule_check.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>

namespace asteroid::planner {

namespace {

std::string owner(const instruction_stream& s) {
  return "s" + std::to_string(s.stage) + "r" + std::to_string(s.replica);
}

[[noreturn]] void fail(const instruction_stream& s, size_t index,
                       const std::string& what) {
  std::string where = owner(s);
  if (index < s.instructions.size())
    where += " instruction " + std::to_string(index) + " (" +
             to_string(s.instructions[index]) + ")";
  throw std::runtime_error("schedule check: " + where + ": " + what);
}

// The stage an op must name as its peer, or -1 where none is allowed.
int expected_peer(op kind, int stage) {
  switch (kind) {
    case op::send_activation:
    case op::recv_grad: return stage + 1;
    case op::recv_activation:
    case op::send_grad: return stage - 1;
    default: return -1;
  }
}

// Position of the single occurrence of (kind, mb); fails on none or several.
size_t find_once(const instruction_stream& s, op kind, int mb) {
  size_t found = s.instructions.size();
  for (size_t i = 0; i < s.instructions.size(); ++i) {
    const auto& in = s.instructions[i];
    if (in.kind != kind || (has_micro_batch(kind) && in.micro_batch != mb))
      continue;
    if (found != s.instructions.size())
      fail(s, i, "second " + to_string(kind) +
                     (has_micro_batch(kind) ? " of mb=" + std::to_string(mb)
                                            : std::string()));
    found = i;
  }
  if (found == s.instructions.size())
    fail(s, found, "no " + to_string(kind) +
                       (has_micro_batch(kind) ? " of mb=" + std::to_string(mb)
                                              : std::string()));
  return found;
}

void check_order(const instruction_stream& s, size_t before, size_t after,
                 const std::string& what) {
  if (before >= after)
    fail(s, after, what);
}

void check_structure(const instruction_stream& s, int num_stages,
                     int micro_batches) {
  int stage = s.stage;
  bool first = stage == 0;
  bool last = stage == num_stages - 1;
  size_t n = s.instructions.size();
  for (size_t i = 0; i < n; ++i) {
    const auto& in = s.instructions[i];
    if (has_micro_batch(in.kind) &&
        (in.micro_batch < 0 || in.micro_batch >= micro_batches))
      fail(s, i, "micro-batch out of range [0, " +
                     std::to_string(micro_batches) + ")");
    int peer = expected_peer(in.kind, stage);
    if (is_communication(in.kind) && (peer < 0 || peer >= num_stages))
      fail(s, i, "stage " + std::to_string(stage) + " of " +
                     std::to_string(num_stages) + " has no such peer");
    if (in.peer_stage != peer)
      fail(s, i, "peer must be " +
                     (peer < 0 ? std::string("none") : "s" + std::to_string(peer)));
    if (in.kind == op::load_micro_batch && !first && !last)
      fail(s, i, "only the first and last stages load micro-batches");
  }
  for (int mb = 0; mb < micro_batches; ++mb) {
    size_t fwd = find_once(s, op::forward, mb);
    size_t bwd = find_once(s, op::backward, mb);
    check_order(s, fwd, bwd, "backward before forward of mb=" +
                                 std::to_string(mb));
    if (first || last)
      check_order(s, find_once(s, op::load_micro_batch, mb), fwd,
                  "forward before load of mb=" + std::to_string(mb));
    if (!first) {
      check_order(s, find_once(s, op::recv_activation, mb), fwd,
                  "forward before its activation is received");
      check_order(s, bwd, find_once(s, op::send_grad, mb),
                  "gradient sent before the backward");
    }
    if (!last) {
      check_order(s, fwd, find_once(s, op::send_activation, mb),
                  "activation sent before the forward");
      check_order(s, find_once(s, op::recv_grad, mb), bwd,
                  "backward before its gradient is received");
    }
  }
  size_t reduce = find_once(s, op::all_reduce, -1);
  size_t step = find_once(s, op::optimizer_step, -1);
  if (n < 2 || reduce != n - 2 || step != n - 1)
    fail(s, n, "stream must end with ALLREDUCE then STEP");
}

enum class channel_kind { activation, grad };
// (from stage, to stage, kind)
using channel_key = std::tuple<int, int, channel_kind>;

struct channel {
  // Micro-batches sent, per sending replica (index into the stage's group).
  std::vector<std::vector<int>> sent;
  // Positions every sender has sent and that agree (the merged message).
  int delivered = 0;
  // Next position each receiving replica reads.
  std::vector<int> read;
};

class executor {
public:
  executor(const std::vector<instruction_stream>& streams, int num_stages,
           send_semantics sem)
      : streams_(streams), sem_(sem), pc_(streams.size(), 0),
        in_flight_(streams.size(), 0), by_stage_(num_stages) {
    for (size_t i = 0; i < streams.size(); ++i)
      by_stage_[streams[i].stage].push_back(i);
    for (int s = 0; s + 1 < num_stages; ++s) {
      make_channel({s, s + 1, channel_kind::activation});
      make_channel({s + 1, s, channel_kind::grad});
    }
  }

  schedule_check_report run() {
    bool progress = true;
    while (progress) {
      progress = false;
      for (size_t i = 0; i < streams_.size(); ++i)
        while (try_step(i))
          progress = true;
    }
    std::string stuck;
    for (size_t i = 0; i < streams_.size(); ++i)
      if (!done(i))
        stuck += (stuck.empty() ? "" : "; ") + owner(streams_[i]) + " waits at " +
                 std::to_string(pc_[i]) + " (" + to_string(current(i)) + ")";
    if (!stuck.empty())
      throw std::runtime_error("schedule check: deadlock: " + stuck);
    for (const auto& [key, ch] : channels_) {
      auto [from, to, kind] = key;
      for (const auto& sent : ch.sent)
        for (int r : ch.read)
          if (r != static_cast<int>(sent.size()))
            throw std::runtime_error(
                "schedule check: " +
                std::string(kind == channel_kind::activation ? "activations"
                                                              : "gradients") +
                " from s" + std::to_string(from) + " to s" +
                std::to_string(to) + ": " + std::to_string(sent.size()) +
                " sent but " + std::to_string(r) + " received");
    }
    return report_;
  }

private:
  void make_channel(channel_key key) {
    auto& ch = channels_[key];
    ch.sent.resize(by_stage_[std::get<0>(key)].size());
    ch.read.assign(by_stage_[std::get<1>(key)].size(), 0);
  }

  bool done(size_t i) const {
    return pc_[i] >= streams_[i].instructions.size();
  }
  const instruction& current(size_t i) const {
    return streams_[i].instructions[pc_[i]];
  }

  static channel_key key_of(const instruction& in, int stage) {
    bool outgoing = in.kind == op::send_activation || in.kind == op::send_grad;
    auto kind = in.kind == op::send_activation || in.kind == op::recv_activation
                    ? channel_kind::activation
                    : channel_kind::grad;
    return outgoing ? channel_key{stage, in.peer_stage, kind}
                    : channel_key{in.peer_stage, stage, kind};
  }

  void advance(size_t i) {
    const auto& in = current(i);
    if (in.kind == op::forward)
      report_.max_in_flight = std::max(report_.max_in_flight, ++in_flight_[i]);
    if (in.kind == op::backward)
      --in_flight_[i];
    ++pc_[i];
    ++report_.instructions;
  }

  // Merges positions that every sending replica has sent.
  void deliver(channel& ch, const instruction_stream& sender) {
    for (;;) {
      size_t pos = static_cast<size_t>(ch.delivered);
      for (const auto& sent : ch.sent)
        if (sent.size() <= pos)
          return;
      for (const auto& sent : ch.sent)
        if (sent[pos] != ch.sent[0][pos])
          throw std::runtime_error(
              "schedule check: replicas of stage " +
              std::to_string(sender.stage) +
              " send micro-batches in different orders (message " +
              std::to_string(pos) + ")");
      ++ch.delivered;
      for (int r : ch.read)
        report_.max_channel_depth =
            std::max(report_.max_channel_depth, ch.delivered - r);
    }
  }

  bool try_step(size_t i) {
    if (done(i))
      return false;
    const auto& s = streams_[i];
    const auto& in = current(i);
    switch (in.kind) {
      case op::send_activation:
      case op::send_grad:
        return sem_ == send_semantics::buffered ? send_buffered(i)
                                                : send_rendezvous(i);
      case op::recv_activation:
      case op::recv_grad:
        return sem_ == send_semantics::buffered && receive(i);
      case op::all_reduce: {
        // Collective: proceed once the whole group has arrived.
        // check_structure put every ALLREDUCE second to last.
        for (size_t j : by_stage_[s.stage])
          if (pc_[j] + 2 < streams_[j].instructions.size())
            return false;
        advance(i);
        return true;
      }
      default:
        advance(i);
        return true;
    }
  }

  bool send_buffered(size_t i) {
    const auto& s = streams_[i];
    const auto& in = current(i);
    auto& ch = channels_.at(key_of(in, s.stage));
    ch.sent[s.replica].push_back(in.micro_batch);
    advance(i);
    deliver(ch, s);
    return true;
  }

  bool receive(size_t i) {
    const auto& s = streams_[i];
    const auto& in = current(i);
    auto& ch = channels_.at(key_of(in, s.stage));
    int& next = ch.read[s.replica];
    if (next >= ch.delivered)
      return false;
    int got = ch.sent[0][next];
    if (got != in.micro_batch)
      fail(s, pc_[i], "the channel delivers mb=" + std::to_string(got) +
                          " first");
    ++next;
    advance(i);
    return true;
  }

  // All senders at this send and all receivers at the matching receive:
  // everyone moves at once; otherwise the sender blocks.
  bool send_rendezvous(size_t i) {
    const auto& s = streams_[i];
    const auto& in = current(i);
    auto key = key_of(in, s.stage);
    auto& ch = channels_.at(key);
    size_t pos = ch.sent[s.replica].size();
    for (size_t j : by_stage_[s.stage])
      if (done(j) || current(j) != in ||
          ch.sent[streams_[j].replica].size() != pos)
        return false;
    int to = in.peer_stage;
    for (size_t j : by_stage_[to]) {
      if (done(j))
        return false;
      const auto& r = current(j);
      if (r.kind != (in.kind == op::send_activation ? op::recv_activation
                                                    : op::recv_grad) ||
          r.peer_stage != s.stage ||
          ch.read[streams_[j].replica] != static_cast<int>(pos))
        return false;
      if (r.micro_batch != in.micro_batch)
        fail(streams_[j], pc_[j], "the channel delivers mb=" +
                                      std::to_string(in.micro_batch) +
                                      " first");
    }
    for (size_t j : by_stage_[s.stage]) {
      ch.sent[streams_[j].replica].push_back(in.micro_batch);
      advance(j);
    }
    ch.delivered = static_cast<int>(pos) + 1;
    for (size_t j : by_stage_[to]) {
      ++ch.read[streams_[j].replica];
      advance(j);
    }
    return true;
  }

  const std::vector<instruction_stream>& streams_;
  send_semantics sem_;
  std::vector<size_t> pc_;
  std::vector<int> in_flight_;
  std::vector<std::vector<size_t>> by_stage_;
  std::map<channel_key, channel> channels_;
  schedule_check_report report_;
};

} // namespace

void check_stream(const instruction_stream& stream, int num_stages,
                  int micro_batches) {
  if (num_stages < 1 || stream.stage < 0 || stream.stage >= num_stages)
    throw std::runtime_error("schedule check: " + owner(stream) +
                             ": stage out of range [0, " +
                             std::to_string(num_stages) + ")");
  if (micro_batches < 1)
    throw std::runtime_error("schedule check: micro_batches=" +
                             std::to_string(micro_batches));
  check_structure(stream, num_stages, micro_batches);
}

schedule_check_report check_schedule(
    const std::vector<instruction_stream>& streams, int micro_batches,
    send_semantics semantics) {
  if (streams.empty())
    throw std::runtime_error("schedule check: no streams");
  if (micro_batches < 1)
    throw std::runtime_error("schedule check: micro_batches=" +
                             std::to_string(micro_batches));
  int num_stages = 0;
  for (const auto& s : streams) {
    if (s.stage < 0)
      throw std::runtime_error("schedule check: " + owner(s) +
                               ": negative stage");
    num_stages = std::max(num_stages, s.stage + 1);
  }
  // Replicas of each stage must be exactly 0..k-1.
  std::vector<std::vector<int>> replicas(num_stages);
  for (const auto& s : streams)
    replicas[s.stage].push_back(s.replica);
  for (int st = 0; st < num_stages; ++st) {
    auto& rs = replicas[st];
    std::sort(rs.begin(), rs.end());
    if (rs.empty())
      throw std::runtime_error("schedule check: stage " + std::to_string(st) +
                               " has no stream");
    for (size_t r = 0; r < rs.size(); ++r)
      if (rs[r] != static_cast<int>(r))
        throw std::runtime_error("schedule check: stage " + std::to_string(st) +
                                 " replicas are not numbered 0.." +
                                 std::to_string(rs.size() - 1));
  }
  for (const auto& s : streams)
    check_structure(s, num_stages, micro_batches);
  return executor(streams, num_stages, semantics).run();
}

} // namespace asteroid::planner
