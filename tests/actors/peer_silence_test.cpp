// The data plane's look at a connection's acknowledgements
// (actors/src/data_plane/peer_silence.hpp) on a loopback TCP connection in
// this thread: a peer that takes nothing (it reads nothing, so its window
// closes and nothing more is acknowledged) is silent once data has waited
// that long; data that gets acknowledged, or nothing waiting, is not.
#include "data_plane/peer_silence.hpp"

#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>
#include <vector>

using asteroid::actors::detail::peer_silence;
using namespace std::chrono_literals;

namespace {

/// A connected pair of loopback TCP sockets (an ephemeral port: nothing
/// else listens on it); closed at the end.
struct tcp_pair {
  int client = -1, server = -1;
  tcp_pair() {
    int listener = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(listener >= 0);
    sockaddr_in at{};
    at.sin_family = AF_INET;
    at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t size = sizeof at;
    REQUIRE(::bind(listener, reinterpret_cast<sockaddr*>(&at), sizeof at) == 0);
    REQUIRE(::listen(listener, 1) == 0);
    REQUIRE(::getsockname(listener, reinterpret_cast<sockaddr*>(&at), &size) == 0);
    client = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(client >= 0);
    REQUIRE(::connect(client, reinterpret_cast<sockaddr*>(&at), sizeof at) == 0);
    server = ::accept(listener, nullptr, nullptr);
    ::close(listener);
    REQUIRE(server >= 0);
    REQUIRE(::fcntl(client, F_SETFL, ::fcntl(client, F_GETFL) | O_NONBLOCK) == 0);
  }
  ~tcp_pair() {
    ::close(client);
    ::close(server);
  }
  /// Writes from the client until its socket takes no more: the server,
  /// which reads nothing, has its receive buffer full and its window shut.
  void fill() {
    std::vector<char> chunk(1 << 16, 'x');
    for (int i = 0; i < 100000; ++i)
      if (::send(client, chunk.data(), chunk.size(), MSG_NOSIGNAL) < 0)
        break;
    // The last acknowledgements arrive meanwhile (loopback: at once).
    std::this_thread::sleep_for(50ms);
  }
  /// Bytes the client wrote that the server's TCP has not acknowledged.
  int waiting() const {
    int n = -1;
    REQUIRE(::ioctl(client, SIOCOUTQ, &n) == 0);
    return n;
  }
  /// Reads what the server holds now.
  void drain() {
    std::vector<char> chunk(1 << 16);
    REQUIRE(::fcntl(server, F_SETFL, ::fcntl(server, F_GETFL) | O_NONBLOCK) == 0);
    while (::recv(server, chunk.data(), chunk.size(), 0) > 0) {
    }
    std::this_thread::sleep_for(50ms);
  }
};

} // namespace

TEST_CASE("peer silence: data that waits unacknowledged for the limit is silence, "
          "counted from when it was first seen waiting",
          "[data_plane][peer_silence]") {
  tcp_pair c;
  c.fill();
  peer_silence watch;
  const auto t0 = peer_silence::clock::now();
  // The clock is the caller's: the kernel's state is read at each call, and
  // nothing the server does changes it here.
  CHECK_FALSE(watch.silent_for(c.client, 100ms, t0));
  CHECK_FALSE(watch.silent_for(c.client, 100ms, t0 + 60ms));
  CHECK(watch.silent_for(c.client, 100ms, t0 + 100ms));
  CHECK(watch.silent_for(c.client, 100ms, t0 + 10s));
  // A fresh watch counts from its own first look.
  peer_silence fresh;
  CHECK_FALSE(fresh.silent_for(c.client, 100ms, t0 + 10s));
  CHECK(fresh.silent_for(c.client, 100ms, t0 + 10s + 100ms));
  // Forgotten (a new connection), it counts again.
  watch.reset();
  CHECK_FALSE(watch.silent_for(c.client, 100ms, t0 + 20s));
}

TEST_CASE("peer silence: acknowledged data and an idle connection are not silence",
          "[data_plane][peer_silence]") {
  tcp_pair c;
  peer_silence watch;
  const auto t0 = peer_silence::clock::now();
  // Nothing written: however long, nothing waits.
  CHECK_FALSE(watch.silent_for(c.client, 100ms, t0));
  CHECK_FALSE(watch.silent_for(c.client, 100ms, t0 + 10s));
  // Waiting, then taken by the peer: what was acknowledged restarts the
  // count, and it is not silence until the limit has passed again.
  c.fill();
  CHECK_FALSE(watch.silent_for(c.client, 100ms, t0 + 20s));
  c.drain();
  c.fill(); // more waits again, after more was acknowledged
  CHECK_FALSE(watch.silent_for(c.client, 100ms, t0 + 30s));
  CHECK(watch.silent_for(c.client, 100ms, t0 + 30s + 100ms));
  // Everything taken: nothing waits, so no silence at any time.
  for (int i = 0; i < 200 && c.waiting() > 0; ++i)
    c.drain();
  REQUIRE(c.waiting() == 0);
  CHECK_FALSE(watch.silent_for(c.client, 100ms, t0 + 40s));
  CHECK_FALSE(watch.silent_for(c.client, 100ms, t0 + 60s));
  // A zero limit turns the look off.
  c.fill();
  CHECK_FALSE(watch.silent_for(c.client, 0ms, t0 + 70s));
  CHECK_FALSE(watch.silent_for(c.client, 0ms, t0 + 80s));
}
