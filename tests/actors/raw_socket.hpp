#pragma once
// A peer that speaks no protocol: raw bytes to a listener on loopback. No
// Catch2 assertions inside, so threads other than the test's may use it.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <string>

namespace asteroid::test {

/// A listener on a free loopback port, with an accept queue of `backlog`;
/// -1 on failure.
inline int listen_loopback(uint16_t& port, int backlog = 4) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (fd < 0)
    return -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0
      || ::listen(fd, backlog) != 0
      || ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    return -1;
  }
  port = ntohs(addr.sin_port);
  return fd;
}

/// A TCP connection to 127.0.0.1:`port` (the caller closes it), or -1.
inline int connect_loopback(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0)
    return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

/// Connects to 127.0.0.1:`port`, writes `bytes`, reads until the peer closes
/// and says whether it did so within 5 s (false also when no connection
/// could be made or the bytes could not be written).
inline bool peer_closes_after(uint16_t port, const std::string& bytes) {
  int fd = connect_loopback(port);
  if (fd < 0)
    return false;
  if (::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL)
      != static_cast<ssize_t>(bytes.size())) {
    ::close(fd);
    return false;
  }
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char buf[256];
  ssize_t k;
  while ((k = ::recv(fd, buf, sizeof buf, 0)) > 0) {
  }
  auto why = errno;
  ::close(fd);
  return k == 0 || (k < 0 && why == ECONNRESET);
}

/// Connects to 127.0.0.1:`port`, writes `bytes` and closes at once; false
/// when no connection could be made.
inline bool send_and_close(uint16_t port, const std::string& bytes) {
  int fd = connect_loopback(port);
  if (fd < 0)
    return false;
  ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  ::close(fd);
  return true;
}

} // namespace asteroid::test
