// Linux's own TCP header, not glibc's <netinet/tcp.h> (whose tcp_info lacks
// the bytes acknowledged): this file includes no asio, which brings in
// glibc's, and is left out of unity builds (actors/CMakeLists.txt).
#include "peer_silence.hpp"

#include <algorithm>
#include <cstddef>
#include <limits>

#if defined(__linux__)
#include <linux/sockios.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#endif

namespace asteroid::actors::detail {

void limit_silence(int fd, std::chrono::milliseconds timeout) {
#if defined(__linux__)
  if (timeout.count() <= 0)
    return;
  const auto ms = static_cast<unsigned int>(
    std::min<int64_t>(timeout.count(), std::numeric_limits<int>::max()));
  // Best effort: without it a silent path is found by the heartbeats only.
  [[maybe_unused]] int rc = ::setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &ms, sizeof ms);
#else
  (void)fd;
  (void)timeout;
#endif
}

bool peer_silence::silent_for(int fd, std::chrono::milliseconds limit, clock::time_point now) {
#if defined(__linux__)
  if (limit.count() <= 0)
    return false;
  // Bytes written and not yet acknowledged, sent or not.
  int waiting = 0;
  tcp_info info{};
  socklen_t size = sizeof info;
  const bool known = ::ioctl(fd, SIOCOUTQ, &waiting) == 0 && waiting > 0
                     && ::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &size) == 0
                     && size >= offsetof(tcp_info, tcpi_bytes_acked)
                                   + sizeof info.tcpi_bytes_acked;
  if (!known) {
    waiting_since_.reset();
    return false;
  }
  // The peer's acknowledgements, not its packets: a packet that
  // acknowledges nothing new (a retransmission of the peer's own data) is
  // no sign that this end's data gets through.
  if (!waiting_since_ || info.tcpi_bytes_acked != acknowledged_) {
    waiting_since_ = now;
    acknowledged_ = info.tcpi_bytes_acked;
    return false;
  }
  return now - *waiting_since_ >= limit;
#else
  (void)fd;
  (void)limit;
  (void)now;
  return false;
#endif
}

} // namespace asteroid::actors::detail
