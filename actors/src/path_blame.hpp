#pragma once
// Which device a report "node R's data plane gave up on node P" loses
// (`ast_unrch`, docs/fault_tolerance.md). Both still answer heartbeats, so
// something must choose: the peer, unless the reporter's own reports lost a
// device before in this job; a node that can reach no one is the one whose
// network failed, and blaming its peers one by one would empty the job.
#include <set>

namespace asteroid::actors::detail {

class path_blame {
public:
  /// The device to lose, or -1 when the report counts for nothing (the
  /// reporter and the peer are the same, or either is lost already).
  int blame(int reporter, int peer, const std::set<int>& lost) {
    if (reporter < 0 || peer < 0 || reporter == peer || lost.count(reporter)
        || lost.count(peer))
      return -1;
    if (blamed_peers_of_.count(reporter))
      return reporter;
    blamed_peers_of_.insert(reporter);
    return peer;
  }

private:
  /// Reporters whose reports lost a peer already.
  std::set<int> blamed_peers_of_;
};

} // namespace asteroid::actors::detail
