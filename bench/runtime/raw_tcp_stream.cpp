#include "raw_tcp_stream.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace asteroid::bench {

namespace {

constexpr size_t piece = size_t{1} << 20;
constexpr int streams = 2;

/// Closes a descriptor when it goes out of scope.
struct descriptor {
  int fd = -1;
  ~descriptor() {
    if (fd >= 0)
      ::close(fd);
  }
};

bool bound_waits(int fd) {
  timeval tv{10, 0};
  return ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) == 0
         && ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) == 0;
}

/// `ip` (dotted IPv4) and `port`; false, and a message on stderr, when `ip`
/// is not an address.
bool address_of(const std::string& ip, uint16_t port, sockaddr_in& a) {
  a = sockaddr_in{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  if (::inet_pton(AF_INET, ip.c_str(), &a.sin_addr) == 1)
    return true;
  std::fprintf(stderr, "runtime_bench: raw TCP stream: %s is not an IPv4 address\n",
               ip.c_str());
  return false;
}

/// A listening socket on `at`, or -1.
int listen_on(const sockaddr_in& at) {
  descriptor listener{::socket(AF_INET, SOCK_STREAM, 0)};
  int one = 1;
  if (listener.fd < 0
      || ::setsockopt(listener.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0
      || ::bind(listener.fd, reinterpret_cast<const sockaddr*>(&at), sizeof at) != 0
      || ::listen(listener.fd, 1) != 0)
    return -1;
  return std::exchange(listener.fd, -1);
}

/// Each payload into a buffer of its own, in calls of at most a piece; one
/// byte back after each stream.
bool receive_streams(int listener, int64_t bytes, int count) {
  pollfd p{listener, POLLIN, 0};
  if (::poll(&p, 1, 10000) != 1)
    return false;
  descriptor c{::accept(listener, nullptr, nullptr)};
  if (c.fd < 0 || !bound_waits(c.fd))
    return false;
  for (int s = 0; s < streams; ++s) {
    for (int i = 0; i < count; ++i) {
      std::unique_ptr<char[]> payload{new char[static_cast<size_t>(bytes)]};
      for (int64_t have = 0; have < bytes;) {
        auto n = ::recv(c.fd, payload.get() + have,
                        std::min<size_t>(piece, static_cast<size_t>(bytes - have)), 0);
        if (n <= 0)
          return false;
        have += n;
      }
    }
    if (::send(c.fd, "k", 1, MSG_NOSIGNAL) != 1)
      return false;
  }
  return true;
}

/// The second of two streams to `at` (the first warms the connection up),
/// in bytes per second; 0 when a call failed (errno says why).
double send_streams(const sockaddr_in& at, int64_t bytes, int count) {
  descriptor s{::socket(AF_INET, SOCK_STREAM, 0)};
  int one = 1;
  bool ok = s.fd >= 0 && bound_waits(s.fd)
            && ::connect(s.fd, reinterpret_cast<const sockaddr*>(&at), sizeof at) == 0
            && ::setsockopt(s.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) == 0;
  double Bps = 0;
  for (int stream = 0; ok && stream < streams; ++stream) {
    std::vector<std::string> payloads(static_cast<size_t>(count),
                                      std::string(static_cast<size_t>(bytes), 'x'));
    auto t0 = std::chrono::steady_clock::now();
    for (auto& payload : payloads)
      for (size_t sent = 0; ok && sent < payload.size();) {
        auto n = ::send(s.fd, payload.data() + sent, std::min(piece, payload.size() - sent),
                        MSG_NOSIGNAL);
        ok = n > 0;
        sent += ok ? static_cast<size_t>(n) : 0;
      }
    char k = 0;
    ok = ok && ::recv(s.fd, &k, 1, 0) == 1;
    auto t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (ok)
      Bps = static_cast<double>(bytes) * count / t;
  }
  return ok ? Bps : 0;
} // closing the connection ends a receiver still waiting for bytes

/// Reports a failed call on stderr; 0.
double failed(const std::string& where, const char* what) {
  // A connection the receiver closed (recv returns 0) sets no errno; the
  // callers clear it first, so a stale one names no wrong cause.
  std::fprintf(stderr, "runtime_bench: raw TCP stream %s: %s: %s\n", where.c_str(), what,
               errno ? std::strerror(errno) : "the receiver closed the connection");
  return 0.0;
}

} // namespace

double raw_tcp_stream_Bps(uint16_t port, int64_t bytes, int count) {
  const auto where = "on port " + std::to_string(port);
  errno = 0;
  sockaddr_in at{};
  address_of("127.0.0.1", port, at);
  descriptor listener{listen_on(at)};
  if (listener.fd < 0)
    return failed(where, "listen");
  std::atomic<bool> received{false};
  std::thread receiver{[&] { received = receive_streams(listener.fd, bytes, count); }};
  double Bps = send_streams(at, bytes, count);
  if (Bps <= 0)
    failed(where, "stream");
  receiver.join();
  if (Bps > 0 && !received) {
    std::fprintf(stderr, "runtime_bench: raw TCP stream %s: the receiver failed\n",
                 where.c_str());
    return 0;
  }
  return Bps;
}

bool raw_tcp_receive(const std::string& ip, uint16_t port, int64_t bytes, int count) {
  const auto where = "receiving on " + ip + ":" + std::to_string(port);
  errno = 0;
  sockaddr_in at{};
  if (!address_of(ip, port, at))
    return false;
  descriptor listener{listen_on(at)};
  if (listener.fd < 0) {
    failed(where, "listen");
    return false;
  }
  if (!receive_streams(listener.fd, bytes, count)) {
    failed(where, "stream");
    return false;
  }
  return true;
}

double raw_tcp_send_Bps(const std::string& ip, uint16_t port, int64_t bytes, int count) {
  const auto where = "to " + ip + ":" + std::to_string(port);
  errno = 0;
  sockaddr_in at{};
  if (!address_of(ip, port, at))
    return 0;
  double Bps = send_streams(at, bytes, count);
  return Bps > 0 ? Bps : failed(where, "stream");
}

} // namespace asteroid::bench
