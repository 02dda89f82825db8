// Connecting to a node whose BASP handshake is slow: CAF 0.17.6 drops a
// client connection that is still waiting for the server's handshake at its
// next heartbeat tick (500 ms here), so connect() must try again.
#include "job_test_helpers.hpp"

#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

using namespace asteroid;
using namespace asteroid::test;

namespace {

/// A TCP forwarder from 127.0.0.1:`port` to 127.0.0.1:`upstream` that holds
/// back the upstream's first bytes for `delay` on its first `slow`
/// connections: their server handshake arrives late, the others' at once.
class slow_handshake_proxy {
public:
  slow_handshake_proxy(uint16_t port, uint16_t upstream,
                       std::chrono::milliseconds delay, int slow)
    : upstream_(upstream), delay_(delay), slow_(slow) {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    ::setsockopt(listener_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    auto addr = loopback(port);
    if (::bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0
        || ::listen(listener_, 8) != 0)
      FAIL("proxy cannot listen on port " << port);
    acceptor_ = std::thread([this] { accept_loop(); });
  }

  ~slow_handshake_proxy() {
    stop_ = true;
    acceptor_.join();
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (int fd : sockets_)
        ::shutdown(fd, SHUT_RDWR);
    }
    for (auto& t : pumps_)
      t.join();
    for (int fd : sockets_)
      ::close(fd);
    ::close(listener_);
  }

  int connections() const { return connections_; }

private:
  static sockaddr_in loopback(uint16_t port) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
  }

  void accept_loop() {
    while (!stop_) {
      pollfd p{listener_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0)
        continue;
      int client = ::accept(listener_, nullptr, nullptr);
      if (client < 0)
        continue;
      int server = ::socket(AF_INET, SOCK_STREAM, 0);
      auto addr = loopback(upstream_);
      if (::connect(server, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        ::close(server);
        ::close(client);
        continue;
      }
      bool late = connections_++ < slow_;
      std::lock_guard<std::mutex> lock(mu_);
      sockets_.push_back(client);
      sockets_.push_back(server);
      pumps_.emplace_back([=] { pump(client, server, {}); });
      pumps_.emplace_back([=] {
        pump(server, client, late ? delay_ : std::chrono::milliseconds{});
      });
    }
  }

  // Copies `from` to `to` until either side closes; the first bytes wait
  // `hold` before they are passed on.
  static void pump(int from, int to, std::chrono::milliseconds hold) {
    char buf[1 << 14];
    bool held = false;
    for (;;) {
      auto n = ::recv(from, buf, sizeof buf, 0);
      if (n <= 0)
        break;
      if (!held) {
        std::this_thread::sleep_for(hold);
        held = true;
      }
      if (::send(to, buf, static_cast<size_t>(n), MSG_NOSIGNAL) != n)
        break;
    }
    ::shutdown(to, SHUT_WR);
  }

  uint16_t upstream_;
  std::chrono::milliseconds delay_;
  int slow_;
  int listener_ = -1;
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0};
  std::thread acceptor_;
  std::mutex mu_;
  std::vector<int> sockets_;
  std::vector<std::thread> pumps_;
};

} // namespace

TEST_CASE("a node whose first handshake spans CAF's heartbeat tick is still "
          "connected") {
  actors::local_cluster cluster{cluster_options(1, 27350)};
  // 1.2 s is more than two 500 ms ticks: the first attempt is always dropped.
  slow_handshake_proxy proxy{27351, 27350, std::chrono::milliseconds(1200), 1};
  caf::actor_system_config cfg;
  actors::configure(cfg);
  caf::actor_system sys{cfg};
  auto t0 = std::chrono::steady_clock::now();
  auto dev = actors::connect(sys, "127.0.0.1", 27351, std::chrono::seconds(10));
  INFO("connected after " << std::chrono::duration<double>(
                                std::chrono::steady_clock::now() - t0).count()
                          << " s");
  CHECK(proxy.connections() >= 2);
  caf::scoped_actor self{sys};
  bool pong = false;
  self->request(dev, std::chrono::seconds(5), caf::ping_atom::value)
    .receive([&](caf::pong_atom) { pong = true; }, [&](caf::error&) {});
  CHECK(pong);
}

TEST_CASE("a node whose every handshake is too slow fails within the "
          "timeout, naming it") {
  actors::local_cluster cluster{cluster_options(1, 27352)};
  slow_handshake_proxy proxy{27353, 27352, std::chrono::milliseconds(1200),
                             1000};
  caf::actor_system_config cfg;
  actors::configure(cfg);
  caf::actor_system sys{cfg};
  auto t0 = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(actors::connect(sys, "127.0.0.1", 27353,
                                    std::chrono::seconds(2)),
                    Catch::Contains("127.0.0.1:27353")
                      && Catch::Contains("dropped at CAF's heartbeat tick"));
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(4));
  CHECK(proxy.connections() >= 2);
}
