// Links that heal (issue 21, item 4): connections broken in the middle of a
// stream of frames, from either end, cost neither a frame nor a duplicate;
// a peer whose process is gone is given up at once, one out of reach after
// the heal timeout (or a served job's path window), and a peer that answers with anything but
// acknowledgements is closed and the frame written again; a probe's echo written again is
// answered again. Two planes in this
// process, or one and a raw socket, on loopback.
#include "asteroid/actors/credentials.hpp"
#include "asteroid/actors/data_plane.hpp"
#include "asteroid/actors/protocol.hpp"

#include "two_planes.hpp"

#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

using namespace asteroid;
using namespace std::chrono_literals;
using serialization::tensor_kind;
using serialization::tensor_message;

namespace {

using test::listen_loopback;
using test::two_planes;

/// The steps of the tensors that arrive at b's sink until `n` did or `wait`
/// passed without one.
std::vector<int64_t> receive(two_planes& p, size_t n,
                             std::chrono::milliseconds wait = 10s) {
  std::vector<int64_t> steps;
  bool more = true;
  while (more && steps.size() < n)
    (*p.self)->receive(
      [&](actors::tensor_atom, tensor_message& m) {
        // The payload is the step's own pattern: a frame resent from the
        // middle would show here.
        CHECK(m.payload == std::string(m.payload.size(), static_cast<char>('a' + m.step % 26)));
        steps.push_back(m.step);
      },
      caf::after(wait) >> [&] { more = false; });
  return steps;
}

/// Sends `n` frames of `bytes` each from a to b while both ends break
/// their connections every `every`; returns the steps b delivered.
std::vector<int64_t> stream_through_resets(two_planes& p, int n, size_t bytes,
                                           std::chrono::milliseconds every) {
  std::atomic<bool> sending{true};
  std::thread breaker([&] {
    for (int i = 0; sending; ++i) {
      std::this_thread::sleep_for(every);
      (i % 2 ? p.a : p.b)->reset_connections();
    }
  });
  std::thread sender([&] {
    for (int s = 0; s < n; ++s) {
      tensor_message m;
      m.kind = tensor_kind::activation;
      m.step = s;
      m.payload = std::string(bytes, static_cast<char>('a' + s % 26));
      CHECK(p.a->send(p.b_at(), p.me.id(), std::move(m)));
    }
  });
  auto got = receive(p, static_cast<size_t>(n));
  sending = false;
  sender.join();
  breaker.join();
  return got;
}

void check_every_step_once_in_order(const std::vector<int64_t>& got, int n) {
  REQUIRE(got.size() == static_cast<size_t>(n));
  for (int s = 0; s < n; ++s)
    if (got[static_cast<size_t>(s)] != s)
      FAIL("frame " << s << " arrived as step " << got[static_cast<size_t>(s)]);
}

} // namespace

namespace {

/// What a plane said of the peers it gave up on (`on_unreachable`), kept
/// for the test's thread: (endpoint, why) in order.
struct unreachable_reports {
  std::shared_ptr<std::mutex> mu = std::make_shared<std::mutex>();
  std::shared_ptr<std::vector<std::pair<std::string, std::string>>> seen =
    std::make_shared<std::vector<std::pair<std::string, std::string>>>();
  actors::data_plane::unreachable_handler handler() const {
    return [mu = mu, seen = seen](const std::string& endpoint, const std::string& why) {
      std::lock_guard<std::mutex> lock{*mu};
      seen->emplace_back(endpoint, why);
    };
  }
  std::vector<std::pair<std::string, std::string>> all() const {
    std::lock_guard<std::mutex> lock{*mu};
    return *seen;
  }
};

/// The next connection within 5 s, reads on it bounded to 5 s; -1 for none.
int accept_within(int listener) {
  pollfd p{listener, POLLIN, 0};
  if (::poll(&p, 1, 5000) != 1)
    return -1;
  int fd = ::accept(listener, nullptr, nullptr);
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

/// The header of the next frame on `fd` (its key and payload read and
/// skipped); type acknowledgement with link 0 when none came.
serialization::frame_header read_frame(int fd) {
  auto read_exactly = [fd](char* out, size_t n) {
    while (n > 0) {
      auto k = ::recv(fd, out, n, 0);
      if (k <= 0)
        return false;
      out += k;
      n -= static_cast<size_t>(k);
    }
    return true;
  };
  std::array<char, serialization::frame_header_size> raw{};
  if (!read_exactly(raw.data(), raw.size()))
    return serialization::acknowledgement_header(0, 0);
  auto h = serialization::decode_frame_header(raw.data());
  std::string rest(h.key_size + h.payload_size, '\0');
  read_exactly(rest.data(), rest.size());
  return h;
}

void write_all(int fd, const std::array<char, serialization::frame_header_size>& bytes) {
  REQUIRE(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL)
          == static_cast<ssize_t>(bytes.size()));
}

} // namespace

TEST_CASE("data plane: connections broken mid-stream lose no frame and "
          "deliver none twice") {
  actors::data_plane::options o;
  // Paced, so the stream lasts long enough (about 1.2 s) for 40 breaks,
  // most of them in the middle of a frame.
  o.rate_Bps = 16e6;
  two_planes p{o};
  const int n = 300;
  auto got = stream_through_resets(p, n, 64 << 10, 30ms);
  check_every_step_once_in_order(got, n);
  auto out = p.a->stats();
  INFO("resent " << out.resent_frames << ", duplicates dropped "
                 << p.b->stats().duplicate_frames << ", dropped out "
                 << out.dropped_out);
  CHECK(out.resent_frames > 0);
  CHECK(out.dropped_out == 0);
  CHECK(p.b->stats().dropped_in == 0);
}

TEST_CASE("data plane with credentials: broken TLS connections heal too") {
  namespace fs = std::filesystem;
  auto dir = fs::path(ASTEROID_TEST_TMP) / "heal-keys";
  fs::remove_all(dir);
  actors::make_cluster_keys(dir.string(), {"a"});
  actors::data_plane::options o;
  o.tls = actors::credentials::from_folder((dir / "a").string());
  o.rate_Bps = 16e6;
  {
    two_planes p{o};
    const int n = 200;
    auto got = stream_through_resets(p, n, 64 << 10, 30ms);
    check_every_step_once_in_order(got, n);
    CHECK(p.a->stats().resent_frames > 0);
    CHECK(p.a->stats().dropped_out == 0);
  }
  fs::remove_all(dir);
}

TEST_CASE("data plane: frames to a peer whose process is gone are dropped at "
          "once, not held for the heal timeout") {
  actors::data_plane::options o;
  o.heal_timeout = 60s; // would show as a test timeout
  two_planes p{o};
  tensor_message m;
  m.kind = tensor_kind::activation;
  m.step = 1;
  REQUIRE(p.a->send(p.b_at(), p.me.id(), m));
  CHECK(receive(p, 1) == std::vector<int64_t>{1});
  unreachable_reports told;
  p.a->on_unreachable(told.handler());
  const auto gone = p.b_at();
  p.b->stop(); // its port now refuses connections
  auto t0 = std::chrono::steady_clock::now();
  for (int s = 2; s < 5; ++s) {
    m.step = s;
    CHECK(p.a->send(gone, p.me.id(), m));
  }
  for (int i = 0; i < 250 && p.a->stats().dropped_out < 3; ++i)
    std::this_thread::sleep_for(20ms);
  CHECK(p.a->stats().dropped_out == 3);
  CHECK(std::chrono::steady_clock::now() - t0 < 5s);
  // Nobody is told: a process gone is for the heartbeats to find, not a
  // path that failed (on_unreachable).
  CHECK(told.all().empty());
}

TEST_CASE("data plane: a link out of reach is given up after the heal "
          "timeout") {
  actors::data_plane::options o;
  o.heal_timeout = 1500ms;
  o.connect_timeout = 300ms;
  two_planes p{o};
  // A listener whose accept queue is full drops every further SYN: a
  // connection to it times out, as to a host behind a cut link.
  uint16_t port = 0;
  int listener = listen_loopback(port, 0);
  REQUIRE(listener >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::vector<int> fillers;
  for (int i = 0; i < 4; ++i) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    fillers.push_back(fd);
  }
  std::this_thread::sleep_for(100ms);
  auto full = "127.0.0.1:" + std::to_string(port);
  unreachable_reports told;
  p.a->on_unreachable(told.handler());
  tensor_message m;
  m.kind = tensor_kind::activation;
  auto t0 = std::chrono::steady_clock::now();
  REQUIRE(p.a->send(full, 1, m));
  REQUIRE(p.a->send(full, 1, m));
  for (int i = 0; i < 500 && p.a->stats().dropped_out < 2; ++i)
    std::this_thread::sleep_for(20ms);
  auto waited = std::chrono::steady_clock::now() - t0;
  for (int fd : fillers)
    ::close(fd);
  ::close(listener);
  CHECK(p.a->stats().dropped_out == 2);
  CHECK(waited >= 1500ms);
  CHECK(waited < 6s);
  // Whoever runs the job hears of it (the node's supervisor: a lost
  // device), once per streak, not per frame.
  auto reports = told.all();
  REQUIRE(reports.size() == 1);
  CHECK(reports.front().first == full);
}


TEST_CASE("data plane: a served job's path window bounds how long a silent "
          "peer is tried (silence, then connecting again), whatever the "
          "options say") {
  actors::data_plane::options o;
  o.silence_timeout = 60s; // either one would show as a test timeout
  o.heal_timeout = 60s;
  o.connect_timeout = 300ms;
  two_planes p{o};
  // The job's heartbeat window and one interval, as the supervisor's claim
  // gives it: 500 ms of silence, then 500 ms to connect again.
  p.a->serve_job(7, 1000ms);
  // A peer whose process never reads: its kernel takes the connection and
  // some megabytes, then holds a zero window, as silent as a cut path
  // towards which data waits.
  uint16_t port = 0;
  int listener = listen_loopback(port, 16);
  REQUIRE(listener >= 0);
  const auto silent = "127.0.0.1:" + std::to_string(port);
  unreachable_reports told;
  p.a->on_unreachable(told.handler());
  tensor_message m;
  m.kind = tensor_kind::activation;
  m.job = 7;
  m.payload.assign(1 << 20, 'x');
  auto t0 = std::chrono::steady_clock::now();
  for (int s = 1; s <= 32; ++s) {
    m.step = s;
    REQUIRE(p.a->send(silent, 1, m));
  }
  for (int i = 0; i < 500 && told.all().empty(); ++i)
    std::this_thread::sleep_for(20ms);
  auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(
    std::chrono::steady_clock::now() - t0);
  ::close(listener);
  auto reports = told.all();
  INFO("given up after " << waited.count() << " ms");
  REQUIRE(reports.size() == 1);
  CHECK(reports.front().first == silent);
  CHECK(waited >= 1000ms);
  CHECK(waited < 6s);
  CHECK(p.a->stats().dropped_out == 32);
  std::printf("[path window] a silent peer given up %lld ms after the first "
              "frame (window 1000 ms: 500 ms silence, 500 ms to connect again)\n",
              static_cast<long long>(waited.count()));
}

TEST_CASE("data plane: a peer that writes a tensor back on our connection is "
          "closed, and what it had not acknowledged goes again on the next") {
  two_planes p;
  uint16_t port = 0;
  int listener = listen_loopback(port);
  REQUIRE(listener >= 0);
  tensor_message m;
  m.kind = tensor_kind::activation;
  m.step = 42;
  m.payload = "hello";
  REQUIRE(p.a->send("127.0.0.1:" + std::to_string(port), 7, m));
  int first = accept_within(listener);
  REQUIRE(first >= 0);
  auto h1 = read_frame(first);
  CHECK(h1.type == serialization::frame_type::tensor);
  CHECK((h1.step == 42 && h1.sequence == 1 && h1.link != 0));
  // Only acknowledgements and probe answers may come back.
  write_all(first, serialization::encode_frame_header(serialization::frame_header_of(m, 1)));
  int second = accept_within(listener);
  REQUIRE(second >= 0);
  auto h2 = read_frame(second);
  CHECK((h2.step == 42 && h2.sequence == 1 && h2.link == h1.link));
  write_all(second, serialization::encode_frame_header(
                      serialization::acknowledgement_header(h1.link, 1)));
  for (int i = 0; i < 250 && p.a->stats().resent_frames < 1; ++i)
    std::this_thread::sleep_for(20ms);
  CHECK(p.a->stats().resent_frames == 1);
  CHECK(p.a->stats().bad_connections == 1);
  CHECK(p.a->stats().dropped_out == 0);
  ::close(first);
  ::close(second);
  ::close(listener);
}

TEST_CASE("data plane: a probe's echo written again on a new connection is "
          "answered again, with the echo's tag") {
  // The prober's plane writes an unacknowledged echo again after its
  // connection broke; the answer to the first copy may have been lost with
  // that connection, and the prober waits for one.
  two_planes p;
  tensor_message m;
  m.kind = tensor_kind::echo;
  m.generation = 7; // the prober's tag for this echo
  m.step = 4242;    // the prober's actor, where the answer goes
  m.payload = "ping";
  auto h = serialization::frame_header_of(m, 0);
  h.link = 99;
  h.sequence = 1;
  auto header = serialization::encode_frame_header(h);
  auto echo_once = [&] {
    int fd = test::connect_loopback(p.b->port());
    REQUIRE(fd >= 0);
    timeval tv{5, 0}; // read_frame's reads end within 5 s
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    write_all(fd, header);
    REQUIRE(::send(fd, m.payload.data(), m.payload.size(), MSG_NOSIGNAL)
            == static_cast<ssize_t>(m.payload.size()));
    auto reply = read_frame(fd);
    auto ack = read_frame(fd);
    ::close(fd);
    return std::make_pair(reply, ack);
  };
  for (int copy = 0; copy < 2; ++copy) {
    auto [reply, ack] = echo_once();
    CHECK(reply.type == serialization::frame_type::tensor);
    CHECK(reply.kind == tensor_kind::echo_reply);
    CHECK(reply.destination == 4242);
    CHECK(reply.generation == 7);
    CHECK(reply.step == 4); // the echo's payload size
    CHECK((ack.type == serialization::frame_type::acknowledgement && ack.link == 99
           && ack.sequence == 1));
  }
  CHECK(p.b->stats().duplicate_frames == 1);
}
