#pragma once
// Reports that a node's data plane gave a peer up (`ast_unrch`), held until
// they can be judged (docs/fault_tolerance.md). A report about a peer that
// has stopped answering heartbeats waits: that peer may be a node fallen
// silent as a whole, which its heartbeats are about to name as such, and a
// path blamed instead could lose the reporter, a healthy node (path_blame).
#include "path_blame.hpp"

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace asteroid::actors::detail {

class unreachable_reports {
public:
  struct loss {
    int device = -1;
    std::string reason;
    /// The node at the failed path's other end.
    int other = -1;
  };

  /// Keeps "`reporter` cannot reach `peer`: `why`"; ignored when either is
  /// no member (-1) or lost, they are the same, or the pair is held already
  /// (so what is held is bounded by the pairs of members).
  void hold(int reporter, int peer, std::string why, const std::set<int>& lost) {
    if (reporter < 0 || peer < 0 || reporter == peer || lost.count(reporter)
        || lost.count(peer))
      return;
    for (const auto& r : held_)
      if (r.reporter == reporter && r.peer == peer)
        return;
    held_.push_back({reporter, peer, std::move(why)});
  }

  /// The device to lose now, if any: the first report whose peer answers
  /// heartbeats (`answers(peer)`), judged by path_blame. Reports about or
  /// from a device lost meanwhile are dropped; those about a silent peer
  /// stay. One loss at a time: the next report is judged with it known.
  std::optional<loss> judge(const std::set<int>& lost, const std::function<bool(int)>& answers,
                            const std::function<std::string(int)>& name) {
    std::optional<loss> out;
    std::vector<report> waiting;
    for (auto& r : held_) {
      if (lost.count(r.reporter) || lost.count(r.peer))
        continue;
      if (out || !answers(r.peer)) {
        waiting.push_back(std::move(r));
        continue;
      }
      const int d = blame_.blame(r.reporter, r.peer, lost);
      if (d == r.reporter)
        out = loss{d, name(r.reporter) + " cannot reach " + name(r.peer)
                        + " over the data plane either (" + r.why
                        + "), after losing another peer that way: its own network failed",
                    r.peer};
      else if (d >= 0)
        out = loss{d, name(r.reporter) + " cannot reach it over the data plane: " + r.why,
                   r.reporter};
    }
    held_ = std::move(waiting);
    return out;
  }

  size_t held() const { return held_.size(); }

private:
  struct report {
    int reporter = -1, peer = -1;
    std::string why;
  };
  path_blame blame_;
  std::vector<report> held_;
};

} // namespace asteroid::actors::detail
