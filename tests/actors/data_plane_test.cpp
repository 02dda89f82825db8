// The data plane between two planes in one process, on loopback with
// ports the kernel picks: delivery, order, bad input, unreachable peers,
// pacing, the probe echo.
#include "asteroid/actors/data_plane.hpp"
#include "asteroid/actors/protocol.hpp"

#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

using namespace asteroid;
using namespace std::chrono_literals;
using serialization::frame_header;
using serialization::frame_kind;

namespace {

struct planes {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  std::shared_ptr<actors::data_plane> a, b;
  explicit planes(actors::data_plane::options o = {}) {
    actors::configure(cfg);
    sys = std::make_unique<caf::actor_system>(cfg);
    a = actors::data_plane::start(o);
    b = actors::data_plane::start(o);
  }
  ~planes() {
    a->stop();
    b->stop();
  }
  std::string b_endpoint() const { return "127.0.0.1:" + std::to_string(b->port()); }
  std::string a_endpoint() const { return "127.0.0.1:" + std::to_string(a->port()); }
};

frame_header header(frame_kind kind, const caf::actor& to, int64_t step,
                    int32_t a = 0, int32_t b = 0) {
  frame_header h;
  h.kind = kind;
  h.destination = to.id();
  h.step = step;
  h.a = a;
  h.b = b;
  return h;
}

/// Writes raw bytes to a listener and reports whether the peer closed.
bool peer_closes_after(uint16_t port, const std::string& bytes) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL)
          == static_cast<ssize_t>(bytes.size()));
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char c;
  auto k = ::recv(fd, &c, 1, 0);
  ::close(fd);
  return k == 0;
}

} // namespace

TEST_CASE("data plane: frames arrive as the runtime's messages, in order") {
  planes p;
  caf::scoped_actor sink{*p.sys};
  auto me = caf::actor_cast<caf::actor>(sink);
  p.b->add_sink(me);
  std::string big(3 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i)
    big[i] = static_cast<char>(i * 131 % 251);
  for (int mb = 0; mb < 5; ++mb)
    REQUIRE(p.a->send(p.b_endpoint(), header(frame_kind::activation, me, 7, mb, 2),
                      {}, big.substr(0, 1000 + static_cast<size_t>(mb))));
  REQUIRE(p.a->send(p.b_endpoint(), header(frame_kind::gradient, me, 8, 1, 3), {}, big));
  REQUIRE(p.a->send(p.b_endpoint(), header(frame_kind::all_reduce, me, 9, 4), {}, "ar"));
  REQUIRE(p.a->send(p.b_endpoint(), header(frame_kind::snapshot, me, 10), "L0-3", "state"));
  for (int mb = 0; mb < 5; ++mb) {
    bool got = false;
    sink->receive(
      [&](actors::act_atom, int64_t step, int32_t m, int32_t from, const std::string& bytes) {
        CHECK(step == 7);
        CHECK(m == mb); // one connection per destination keeps the order
        CHECK(from == 2);
        CHECK(bytes == big.substr(0, 1000 + static_cast<size_t>(mb)));
        got = true;
      },
      caf::after(10s) >> [] {});
    REQUIRE(got);
  }
  bool got = false;
  sink->receive(
    [&](actors::grad_atom, int64_t step, int32_t m, int32_t from, const std::string& bytes) {
      CHECK((step == 8 && m == 1 && from == 3));
      CHECK(bytes == big);
      got = true;
    },
    caf::after(10s) >> [] {});
  REQUIRE(got);
  got = false;
  sink->receive(
    [&](actors::ar_atom, int64_t step, int32_t k, const std::string& bytes) {
      CHECK((step == 9 && k == 4 && bytes == "ar"));
      got = true;
    },
    caf::after(10s) >> [] {});
  REQUIRE(got);
  got = false;
  sink->receive(
    [&](actors::snap_atom, const std::string& key, int64_t version,
        const std::string& bytes) {
      CHECK((key == "L0-3" && version == 10 && bytes == "state"));
      got = true;
    },
    caf::after(10s) >> [] {});
  REQUIRE(got);
  auto s = p.a->stats();
  CHECK(s.frames_out == 8);
  CHECK(s.dropped_out == 0);
}

TEST_CASE("data plane: frames for an actor that is gone are dropped") {
  planes p;
  caf::scoped_actor sink{*p.sys};
  auto me = caf::actor_cast<caf::actor>(sink);
  auto gone = p.sys->spawn([](caf::event_based_actor* self) -> caf::behavior {
    return {[=](actors::stop_atom) { self->quit(); }};
  });
  p.b->add_sink(gone);
  p.b->add_sink(me);
  caf::anon_send(gone, actors::stop_atom::value);
  // After the actor exits its sink entry goes; wait (bounded) for that.
  auto dest = header(frame_kind::activation, gone, 1);
  for (int i = 0; i < 100 && p.b->stats().dropped_in == 0; ++i) {
    p.a->send(p.b_endpoint(), dest, {}, "x");
    std::this_thread::sleep_for(20ms);
  }
  CHECK(p.b->stats().dropped_in > 0);
  // The plane still serves the live sink.
  REQUIRE(p.a->send(p.b_endpoint(), header(frame_kind::all_reduce, me, 5), {}, "ok"));
  bool got = false;
  sink->receive([&](actors::ar_atom, int64_t, int32_t, const std::string& b) { got = b == "ok"; },
                caf::after(10s) >> [] {});
  CHECK(got);
}

TEST_CASE("data plane: a bad frame closes that connection only") {
  planes p;
  caf::scoped_actor sink{*p.sys};
  auto me = caf::actor_cast<caf::actor>(sink);
  p.b->add_sink(me);
  CHECK(peer_closes_after(p.b->port(), std::string(64, 'G'))); // bad magic
  frame_header huge = header(frame_kind::activation, me, 1);
  huge.payload_size = std::uint64_t{1} << 40; // beyond the limit: no allocation
  auto bytes = serialization::encode_frame_header(huge);
  CHECK(peer_closes_after(p.b->port(), std::string(bytes.begin(), bytes.end())));
  CHECK(p.b->stats().bad_connections == 2);
  REQUIRE(p.a->send(p.b_endpoint(), header(frame_kind::all_reduce, me, 5), {}, "still here"));
  bool got = false;
  sink->receive(
    [&](actors::ar_atom, int64_t, int32_t, const std::string& b) { got = b == "still here"; },
    caf::after(10s) >> [] {});
  CHECK(got);
}

TEST_CASE("data plane: frames to a node that does not answer are dropped, "
          "the sender does not hang") {
  actors::data_plane::options o;
  o.connect_timeout = 500ms;
  planes p{o};
  // A port nobody listens on (ours, closed again).
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  auto dead = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  ::close(fd);
  frame_header h;
  h.kind = frame_kind::activation;
  for (int i = 0; i < 3; ++i)
    CHECK(p.a->send(dead, h, {}, "lost"));
  for (int i = 0; i < 250 && p.a->stats().dropped_out < 3; ++i)
    std::this_thread::sleep_for(20ms);
  CHECK(p.a->stats().dropped_out == 3);
  CHECK(p.a->stats().frames_out == 0);
  // A malformed address is the writer's problem too: queued, then dropped.
  CHECK(p.a->send("no-port", h, {}, "x"));
  for (int i = 0; i < 250 && p.a->stats().dropped_out < 4; ++i)
    std::this_thread::sleep_for(20ms);
  CHECK(p.a->stats().dropped_out == 4);
}

TEST_CASE("data plane: the probe echo comes back to the prober's sink") {
  planes p;
  caf::scoped_actor prober{*p.sys};
  p.a->add_sink(caf::actor_cast<caf::actor>(prober));
  frame_header h;
  h.kind = frame_kind::echo;
  h.step = static_cast<int64_t>(prober->id());
  REQUIRE(p.a->send(p.b_endpoint(), h, p.a_endpoint(), std::string(12345, 'e')));
  int64_t size = -1;
  prober->receive([&](actors::echo_atom, int64_t n) { size = n; },
                  caf::after(10s) >> [] {});
  CHECK(size == 12345);
}

TEST_CASE("data plane: a paced plane keeps to its rate") {
  actors::data_plane::options o;
  o.rate_Bps = 4e6; // 4 MB/s: 1 MB takes at least a quarter second
  planes p{o};
  caf::scoped_actor sink{*p.sys};
  auto me = caf::actor_cast<caf::actor>(sink);
  p.b->add_sink(me);
  auto t0 = std::chrono::steady_clock::now();
  REQUIRE(p.a->send(p.b_endpoint(), header(frame_kind::all_reduce, me, 1), {},
                    std::string(1000000, 'r')));
  bool got = false;
  sink->receive([&](actors::ar_atom, int64_t, int32_t, const std::string&) { got = true; },
                caf::after(10s) >> [] {});
  REQUIRE(got);
  auto dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // A lower bound only (a loaded machine may take longer, never shorter).
  CHECK(dt >= 0.2);
}

