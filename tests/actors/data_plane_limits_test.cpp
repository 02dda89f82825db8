// What a peer can make a data plane hold (issue 21, item 3): idle
// connections, headers that claim more than they send or more than their
// destination expects, descriptor exhaustion, echoes that name a foreign
// address, connections that go idle or whose destination restarts. Two
// planes in this process, on loopback.
#include "asteroid/actors/data_plane.hpp"
#include "asteroid/actors/protocol.hpp"

#include "raw_socket.hpp"
#include "settled_stats.hpp"
#include "two_planes.hpp"

#include <catch2/catch.hpp>

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/resource.h>
#include <unistd.h>

#include <fstream>
#include <thread>
#include <vector>

using namespace asteroid;
using namespace std::chrono_literals;
using serialization::tensor_kind;
using serialization::tensor_message;

namespace {

using test::two_planes;

int64_t resident_kib() {
  std::ifstream in{"/proc/self/status"};
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0)
      return std::stoll(line.substr(6));
  return -1;
}

int threads_now() {
  int n = 0;
  if (DIR* d = ::opendir("/proc/self/task")) {
    while (auto* e = ::readdir(d))
      n += e->d_name[0] != '.';
    ::closedir(d);
  }
  return n;
}

double cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec)
         + static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

std::string header_bytes(int64_t job, uint64_t destination, uint64_t payload_size) {
  serialization::frame_header h;
  h.kind = tensor_kind::activation;
  h.job = job;
  h.destination = destination;
  h.payload_size = payload_size;
  auto raw = serialization::encode_frame_header(h);
  return std::string(raw.begin(), raw.end());
}

} // namespace

TEST_CASE("data plane: 200 idle connections and 2 GiB header claims cost "
          "neither threads nor memory, and members are still served") {
  actors::data_plane::options o;
  o.max_incoming = 64;
  two_planes p{o};
  REQUIRE(p.send_to_b(1));
  REQUIRE(p.next_step() == 1);
  const auto threads_before = threads_now();
  const auto kib_before = resident_kib();

  // 32 headers of the served job (none) claiming 2 GiB, 10 bytes each:
  // each holds one first piece of its payload (64 KiB), not more.
  std::vector<int> held;
  for (int i = 0; i < 32; ++i) {
    int fd = test::connect_loopback(p.b->port());
    REQUIRE(fd >= 0);
    auto bytes = header_bytes(0, p.me.id(), (uint64_t{1} << 31) - 1) + std::string(10, 'p');
    REQUIRE(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL)
            == static_cast<ssize_t>(bytes.size()));
    held.push_back(fd);
  }
  // 200 connections that say nothing.
  for (int i = 0; i < 200; ++i) {
    int fd = test::connect_loopback(p.b->port());
    REQUIRE(fd >= 0);
    held.push_back(fd);
  }
  std::this_thread::sleep_for(300ms);
  // The member's connection is its own: frames still arrive.
  for (int step = 2; step < 5; ++step) {
    REQUIRE(p.send_to_b(step));
    CHECK(p.next_step() == step);
  }
  const auto threads_after = threads_now();
  const auto kib_after = resident_kib();
  INFO("threads " << threads_before << " -> " << threads_after << ", resident "
                  << kib_before << " -> " << kib_after << " KiB");
  CHECK(threads_after - threads_before < 8);
  CHECK(kib_after - kib_before < 16 * 1024); // 1 MiB pieces held 32 MiB
  auto s = p.b->stats();
  CHECK(s.evicted_connections > 0); // the cap held: the oldest silent ones went

  for (int fd : held)
    ::close(fd);
  // Served normally once they are gone.
  REQUIRE(p.send_to_b(5, std::string(3 << 20, 'z')));
  CHECK(p.next_step() == 5);
}

TEST_CASE("data plane: a frame larger than its destination expects is "
          "refused before it is read, and one within the cap is delivered") {
  two_planes p;
  p.b->add_sink(p.me, 4096); // what a replica's deployment would set
  REQUIRE(p.send_to_b(1, std::string(4096, 'a')));
  CHECK(p.next_step() == 1);
  // One byte over, claimed by a peer that then sends nothing: closed on the
  // header's word, nothing delivered.
  CHECK(test::peer_closes_after(p.b->port(), header_bytes(0, p.me.id(), 4097)));
  // An actor that is gone (or never was) is held to the largest cap of any
  // sink, not to the plane's 2 GiB.
  CHECK(test::peer_closes_after(p.b->port(), header_bytes(0, 987654, 1 << 20)));
  CHECK(p.b->stats().oversized_frames == 2);
  CHECK(p.next_step(200ms) == -1);
  // A member's frames within the cap still arrive.
  REQUIRE(p.send_to_b(2, "ok"));
  CHECK(p.next_step() == 2);
}

TEST_CASE("data plane: a silent peer is closed after the handshake timeout, "
          "an idle one after the idle timeout") {
  actors::data_plane::options o;
  o.handshake_timeout = 500ms;
  o.idle_timeout = 1s;
  two_planes p{o};
  // Says nothing at all.
  CHECK(test::peer_closes_after(p.b->port(), ""));
  // One whole frame, then silence: closed after the idle timeout.
  auto frame = header_bytes(0, p.me.id(), 3) + "abc";
  CHECK(test::peer_closes_after(p.b->port(), frame));
  CHECK(p.next_step(1s) == 0);
  CHECK(p.b->stats().silent_connections == 2);
  // A member plane closes its own idle connection first (at half the idle
  // timeout), so the next frame goes on a new one and nothing is lost.
  REQUIRE(p.send_to_b(1));
  CHECK(p.next_step() == 1);
  std::this_thread::sleep_for(1500ms);
  REQUIRE(p.send_to_b(2));
  CHECK(p.next_step() == 2);
  auto s = test::settled_stats(*p.a, [](const auto& c) { return c.frames_out >= 2; });
  CHECK(s.dropped_out == 0);
  CHECK(s.frames_out == 2);
}

TEST_CASE("data plane: when descriptors run out the listener backs off, and "
          "accepts again once they are free") {
  two_planes p;
  REQUIRE(p.send_to_b(1));
  REQUIRE(p.next_step() == 1);
  rlimit old{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &old) == 0);
  // Exhaust the process's descriptors (a low limit keeps that quick).
  std::vector<int> spare;
  int probe = ::open("/dev/null", O_RDONLY);
  REQUIRE(probe >= 0);
  rlimit low = old;
  low.rlim_cur = static_cast<rlim_t>(probe + 32);
  ::close(probe);
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &low) == 0);
  for (;;) {
    int fd = ::open("/dev/null", O_RDONLY);
    if (fd < 0)
      break;
    spare.push_back(fd);
  }
  // One descriptor for the client; the plane has none left to accept with.
  ::close(spare.back());
  spare.pop_back();
  int client = test::connect_loopback(p.b->port());
  REQUIRE(client >= 0);
  auto frame = header_bytes(0, p.me.id(), 2) + "ok";
  REQUIRE(::send(client, frame.data(), frame.size(), MSG_NOSIGNAL)
          == static_cast<ssize_t>(frame.size()));
  const auto cpu0 = cpu_seconds();
  std::this_thread::sleep_for(1s);
  const auto cpu = cpu_seconds() - cpu0;
  const auto failures = p.b->stats().accept_failures;
  for (int fd : spare)
    ::close(fd);
  ::setrlimit(RLIMIT_NOFILE, &old);
  INFO("accept failures " << failures << ", CPU " << cpu << " s in 1 s");
  CHECK(failures >= 1);
  CHECK(failures <= 20); // a back-off of 100 ms, not a spin
  CHECK(cpu < 0.5);
  // The pending connection is accepted and its frame delivered.
  CHECK(p.next_step() == 0);
  ::close(client);
  REQUIRE(p.send_to_b(2));
  CHECK(p.next_step() == 2);
}

TEST_CASE("data plane: an echo is answered on its own connection, never by "
          "connecting to the address it names") {
  two_planes p;
  // A listener at the address the echo names.
  uint16_t lure_port = 0;
  int lure = test::listen_loopback(lure_port, 8);
  REQUIRE(lure >= 0);
  p.a->add_sink(p.me);
  for (int i = 0; i < 3; ++i) {
    tensor_message echo;
    echo.kind = tensor_kind::echo;
    echo.step = static_cast<int64_t>(p.me.id());
    echo.key = "127.0.0.1:" + std::to_string(lure_port);
    echo.payload = std::string(1000 + i, 'e');
    REQUIRE(p.a->send(p.b_at(), 0, echo));
    CHECK(p.next_step() == 1000 + i);
  }
  pollfd pf{lure, POLLIN, 0};
  CHECK(::poll(&pf, 1, 300) == 0); // nobody connected to it
  ::close(lure);
}

TEST_CASE("data plane: a destination that restarts on its port gets the next "
          "frame on a new connection") {
  two_planes p;
  REQUIRE(p.send_to_b(1));
  REQUIRE(p.next_step() == 1);
  auto port = p.b->port();
  p.b->stop();
  actors::data_plane::options o;
  o.port = port;
  p.b = actors::data_plane::start(o);
  p.b->add_sink(p.me);
  std::this_thread::sleep_for(200ms); // the old connection's end is seen
  REQUIRE(p.send_to_b(2));
  CHECK(p.next_step() == 2);
  CHECK(p.a->stats().dropped_out == 0);
}

TEST_CASE("data plane: a large frame on a slow link is not taken for a silent "
          "connection") {
  actors::data_plane::options o;
  o.idle_timeout = 1s;
  o.rate_Bps = 2e6; // 6 MiB take about 3 s, three idle timeouts
  two_planes p{o};
  REQUIRE(p.send_to_b(1, std::string(6 << 20, 's')));
  CHECK(p.next_step(20s) == 1);
  CHECK(p.b->stats().silent_connections == 0);
  CHECK(p.a->stats().resent_frames == 0);
}

TEST_CASE("data plane: a new job, or none, closes the last job's connections") {
  two_planes p;
  p.b->serve_job(5);
  // A raw peer and a member plane, each with a frame of job 5 delivered.
  int raw = test::connect_loopback(p.b->port());
  REQUIRE(raw >= 0);
  auto frame = header_bytes(5, p.me.id(), 2) + "ok";
  REQUIRE(::send(raw, frame.data(), frame.size(), MSG_NOSIGNAL)
          == static_cast<ssize_t>(frame.size()));
  CHECK(p.next_step() == 0);
  tensor_message m;
  m.kind = tensor_kind::activation;
  m.job = 5;
  m.step = 1;
  REQUIRE(p.a->send(p.b_at(), p.me.id(), m));
  CHECK(p.next_step() == 1);

  p.b->serve_job(6);
  timeval tv{5, 0};
  ::setsockopt(raw, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char c;
  CHECK(::recv(raw, &c, 1, 0) == 0); // closed, not timed out
  ::close(raw);
  // The member connects afresh for the new job's frames.
  std::this_thread::sleep_for(200ms);
  m.job = 6;
  m.step = 2;
  REQUIRE(p.a->send(p.b_at(), p.me.id(), m));
  CHECK(p.next_step() == 2);
  CHECK(p.a->stats().dropped_out == 0);
}

TEST_CASE("data plane that takes no connections (the supervisor's, which only "
          "sends): every connection made to it is closed at once, and its own "
          "frames still arrive") {
  two_planes p;
  actors::data_plane::options send_only;
  send_only.max_incoming = 0;
  auto sender = actors::data_plane::start(send_only);
  // A header of the job it serves (none) and a destination: closed unread.
  CHECK(test::peer_closes_after(sender->port(), header_bytes(0, p.me.id(), 16)));
  CHECK(test::peer_closes_after(sender->port(), std::string{}));
  CHECK(sender->stats().evicted_connections >= 2);
  CHECK(sender->stats().frames_in == 0);
  // Its frames go out on the connection it opens, whose acknowledgements
  // come back on that connection.
  for (int64_t step = 1; step <= 3; ++step) {
    serialization::tensor_message m;
    m.kind = tensor_kind::activation;
    m.step = step;
    m.payload = "x";
    REQUIRE(sender->send(p.b_at(), p.me.id(), std::move(m)));
    CHECK(p.next_step() == step);
  }
  CHECK(sender->stats().dropped_out == 0);
  sender->stop();
}
