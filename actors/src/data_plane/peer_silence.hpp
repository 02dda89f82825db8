#pragma once
// Noticing a peer whose TCP falls silent while data waits for it.
#include <chrono>
#include <cstdint>
#include <optional>

namespace asteroid::actors::detail {

/// TCP_USER_TIMEOUT on socket `fd`: data the peer's TCP leaves
/// unacknowledged this long breaks the connection
/// (data_plane::options::silence_timeout says why). 0 leaves the kernel's
/// default.
void limit_silence(int fd, std::chrono::milliseconds timeout);

/// Finds, by looking at a socket now and then, that data has waited in it
/// for a while without the peer's TCP acknowledging any of it.
/// TCP_USER_TIMEOUT alone finds that late, or not at all, where a path
/// fails in one direction only: any packet from the peer restarts it, and
/// a peer that still sends (retransmitting its own data, whose
/// acknowledgements are lost) keeps it from firing; and where this end's
/// own queue drops what TCP hands it (the testbed's path cut), TCP waits
/// with probes whose back-off decides when the timeout is looked at. On the
/// testbed a 625 ms timeout broke such a connection 1.5-1.7 s after the
/// cut. Linux only (SIOCOUTQ, TCP_INFO's bytes acknowledged); elsewhere, or
/// where the kernel does not report them, nothing is ever silent and the
/// timeout alone applies.
class peer_silence {
public:
  using clock = std::chrono::steady_clock;

  /// True once data has waited in socket `fd` for `limit` while the peer's
  /// TCP acknowledged none of it, counted from the first call that saw it
  /// waiting with that many bytes acknowledged. Call every fraction of
  /// `limit`.
  bool silent_for(int fd, std::chrono::milliseconds limit, clock::time_point now = clock::now());

  /// Forget what was seen (a new connection, nothing waiting).
  void reset() { waiting_since_.reset(); }

private:
  std::optional<clock::time_point> waiting_since_;
  uint64_t acknowledged_ = 0;
};

} // namespace asteroid::actors::detail
