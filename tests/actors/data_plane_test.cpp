// The data plane between two planes in one process, on loopback with
// ports the kernel picks: delivery, order, bad input, unreachable peers,
// pacing, the probe echo.
#include "asteroid/actors/credentials.hpp"
#include "asteroid/actors/data_plane.hpp"
#include "asteroid/actors/protocol.hpp"

#include "raw_socket.hpp"
#include "settled_stats.hpp"

#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <thread>
#include <vector>

using namespace asteroid;
using namespace std::chrono_literals;
using serialization::frame_header;
using serialization::tensor_kind;
using serialization::tensor_message;

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
  /// `sink` as a sink of plane b; returns its handle.
  caf::actor b_sink(caf::scoped_actor& sink) {
    auto me = caf::actor_cast<caf::actor>(sink);
    b->add_sink(me);
    return me;
  }
  std::string a_endpoint() const { return "127.0.0.1:" + std::to_string(a->port()); }
};

tensor_message msg(tensor_kind kind, int64_t step, int32_t mb = 0,
                   int32_t sender = 0, std::string payload = {},
                   std::string key = {}) {
  tensor_message m;
  m.kind = kind;
  m.generation = 5;
  m.step = step;
  m.micro_batch = mb;
  m.piece = mb + 1;
  m.sender = sender;
  m.key = std::move(key);
  m.payload = std::move(payload);
  return m;
}

/// The next tensor message `self` receives within 10 s (kind 0: none).
tensor_message next_tensor(caf::scoped_actor& self) {
  tensor_message got;
  got.kind = static_cast<tensor_kind>(0);
  self->receive([&](actors::tensor_atom, tensor_message& m) { got = std::move(m); },
                caf::after(10s) >> [] {});
  return got;
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
    REQUIRE(p.a->send(p.b_endpoint(), me.id(),
                      msg(tensor_kind::activation, 7, mb, 2,
                          big.substr(0, 1000 + static_cast<size_t>(mb)))));
  REQUIRE(p.a->send(p.b_endpoint(), me.id(), msg(tensor_kind::gradient, 8, 1, 3, big)));
  REQUIRE(p.a->send(p.b_endpoint(), me.id(), msg(tensor_kind::all_reduce, 9, 4, 0, "ar")));
  REQUIRE(p.a->send(p.b_endpoint(), me.id(),
                    msg(tensor_kind::snapshot, 10, 0, 0, "state", "L0-3")));
  // The stage state takes a connection of its own (data_plane.hpp): it may
  // come at any point; everything else comes in the order it was sent.
  std::vector<tensor_message> got;
  tensor_message state;
  for (int i = 0; i < 8; ++i) {
    auto m = next_tensor(sink);
    REQUIRE(static_cast<int>(m.kind) != 0);
    if (m.kind == tensor_kind::snapshot)
      state = std::move(m);
    else
      got.push_back(std::move(m));
  }
  REQUIRE(got.size() == 7);
  size_t taken = 0;
  auto next = [&] { return std::move(got[taken++]); };
  for (int mb = 0; mb < 5; ++mb) {
    auto m = next();
    REQUIRE(m.kind == tensor_kind::activation);
    CHECK(m.step == 7);
    CHECK(m.micro_batch == mb); // one connection per destination keeps the order
    CHECK(m.generation == 5);
    CHECK(m.piece == mb + 1);
    CHECK(m.sender == 2);
    CHECK(m.payload == big.substr(0, 1000 + static_cast<size_t>(mb)));
  }
  auto m = next();
  REQUIRE(m.kind == tensor_kind::gradient);
  CHECK((m.step == 8 && m.micro_batch == 1 && m.sender == 3));
  CHECK(m.payload == big);
  m = next();
  REQUIRE(m.kind == tensor_kind::all_reduce);
  CHECK((m.step == 9 && m.piece == 5 && m.payload == "ar"));
  REQUIRE(state.kind == tensor_kind::snapshot);
  CHECK((state.key == "L0-3" && state.step == 10 && state.payload == "state"));
  auto s = test::settled_stats(*p.a, [](const auto& c) { return c.frames_out >= 8; });
  CHECK(s.frames_out == 8);
  CHECK(s.dropped_out == 0);
}

TEST_CASE("data plane: payloads too large to stay cached arrive byte for byte, plain "
          "and over TLS") {
  // Payloads of 4 MiB and more are read through a small buffer and copied
  // on around the cache (actors/src/data_plane/payload_bytes.hpp); smaller
  // ones between them are read into place; lengths that are no multiple of
  // the pieces end mid-piece.
  namespace fs = std::filesystem;
  auto dir = fs::path(ASTEROID_TEST_TMP) / "large-payload-keys";
  fs::remove_all(dir);
  actors::make_cluster_keys(dir.string(), {"a"});
  const std::vector<size_t> sizes{(size_t{9} << 20) + 7, size_t{4} << 20, 1000,
                                  (size_t{4} << 20) - 1, (size_t{17} << 20) + 4097};
  // Payload i is `bytes` from offset i on.
  std::string bytes((size_t{17} << 20) + 4097 + sizes.size(), '\0');
  for (size_t i = 0; i < bytes.size(); ++i)
    bytes[i] = static_cast<char>(i * 131 % 251);
  for (bool tls : {false, true}) {
    INFO((tls ? "TLS" : "plain TCP"));
    actors::data_plane::options o;
    if (tls)
      o.tls = actors::credentials::from_folder((dir / "a").string());
    planes p{o};
    caf::scoped_actor sink{*p.sys};
    auto me = p.b_sink(sink);
    for (size_t i = 0; i < sizes.size(); ++i)
      REQUIRE(p.a->send(p.b_endpoint(), me.id(),
                        msg(tensor_kind::activation, static_cast<int64_t>(i), 0, 0,
                            bytes.substr(i, sizes[i]))));
    for (size_t i = 0; i < sizes.size(); ++i) {
      auto m = next_tensor(sink);
      REQUIRE(m.kind == tensor_kind::activation);
      REQUIRE(m.step == static_cast<int64_t>(i));
      REQUIRE(m.payload.size() == sizes[i]);
      CHECK(m.payload.compare(0, sizes[i], bytes, i, sizes[i]) == 0);
    }
  }
  fs::remove_all(dir);
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
  for (int i = 0; i < 100 && p.b->stats().dropped_in == 0; ++i) {
    p.a->send(p.b_endpoint(), gone.id(), msg(tensor_kind::activation, 1, 0, 0, "x"));
    std::this_thread::sleep_for(20ms);
  }
  CHECK(p.b->stats().dropped_in > 0);
  // The plane still serves the live sink.
  REQUIRE(p.a->send(p.b_endpoint(), me.id(), msg(tensor_kind::all_reduce, 5, 0, 0, "ok")));
  CHECK(next_tensor(sink).payload == "ok");
}

TEST_CASE("data plane: a bad frame closes that connection only") {
  planes p;
  caf::scoped_actor sink{*p.sys};
  auto me = caf::actor_cast<caf::actor>(sink);
  p.b->add_sink(me);
  CHECK(test::peer_closes_after(p.b->port(),
                              std::string(serialization::frame_header_size, 'G'))); // bad magic
  frame_header huge = serialization::frame_header_of(msg(tensor_kind::activation, 1), me.id());
  huge.payload_size = std::uint64_t{1} << 40; // beyond the limit: no allocation
  auto bytes = serialization::encode_frame_header(huge);
  CHECK(test::peer_closes_after(p.b->port(), std::string(bytes.begin(), bytes.end())));
  CHECK(p.b->stats().bad_connections == 2);
  REQUIRE(p.a->send(p.b_endpoint(), me.id(),
                    msg(tensor_kind::all_reduce, 5, 0, 0, "still here")));
  CHECK(next_tensor(sink).payload == "still here");
}

TEST_CASE("data plane: a frame of another job closes its connection before its "
          "payload is read") {
  planes p;
  caf::scoped_actor sink{*p.sys};
  auto me = caf::actor_cast<caf::actor>(sink);
  p.b->add_sink(me);
  p.b->serve_job(41);
  auto ours = msg(tensor_kind::activation, 1, 0, 0, "ours");
  ours.job = 41;
  REQUIRE(p.a->send(p.b_endpoint(), me.id(), ours));
  CHECK(next_tensor(sink).payload == "ours");
  // A header of job 42 claiming 1 GiB: the connection closes on the header.
  frame_header theirs = serialization::frame_header_of(msg(tensor_kind::activation, 1), me.id());
  theirs.job = 42;
  theirs.payload_size = std::uint64_t{1} << 30;
  auto bytes = serialization::encode_frame_header(theirs);
  CHECK(test::peer_closes_after(p.b->port(), std::string(bytes.begin(), bytes.end())));
  CHECK(p.b->stats().bad_connections == 1);
  CHECK(p.b->stats().frames_in == 1);
  // Between jobs (0) a frame of job 41 is refused too.
  p.b->serve_job(0);
  bytes = serialization::encode_frame_header(
    serialization::frame_header_of(ours, me.id()));
  CHECK(test::peer_closes_after(p.b->port(), std::string(bytes.begin(), bytes.end())));
  CHECK(p.b->stats().bad_connections == 2);
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
  for (int i = 0; i < 3; ++i)
    CHECK(p.a->send(dead, 1, msg(tensor_kind::activation, 0, 0, 0, "lost")));
  for (int i = 0; i < 250 && p.a->stats().dropped_out < 3; ++i)
    std::this_thread::sleep_for(20ms);
  CHECK(p.a->stats().dropped_out == 3);
  CHECK(p.a->stats().frames_out == 0);
  // A malformed address is the writer's problem too: queued, then dropped.
  CHECK(p.a->send("no-port", 1, msg(tensor_kind::activation, 0, 0, 0, "x")));
  for (int i = 0; i < 250 && p.a->stats().dropped_out < 4; ++i)
    std::this_thread::sleep_for(20ms);
  CHECK(p.a->stats().dropped_out == 4);
}

TEST_CASE("data plane: the probe echo comes back to the prober's sink") {
  planes p;
  caf::scoped_actor prober{*p.sys};
  p.a->add_sink(caf::actor_cast<caf::actor>(prober));
  auto echo = msg(tensor_kind::echo, static_cast<int64_t>(prober->id()), 0, 0,
                 std::string(12345, 'e'), p.a_endpoint());
  REQUIRE(p.a->send(p.b_endpoint(), 0, echo));
  auto reply = next_tensor(prober);
  CHECK(reply.kind == tensor_kind::echo_reply);
  CHECK(reply.step == 12345);
}

TEST_CASE("data plane: a probe echo addressed to no actor is taken in without a reply") {
  // A link probe's stream sends its payloads as echoes for actor 0 and asks
  // only the last one for an answer (probe_timing.hpp).
  planes p;
  caf::scoped_actor prober{*p.sys};
  p.a->add_sink(caf::actor_cast<caf::actor>(prober));
  REQUIRE(p.a->send(p.b_endpoint(), 0,
                    msg(tensor_kind::echo, 0, 0, 0, std::string(111, 'f'), p.a_endpoint())));
  REQUIRE(p.a->send(p.b_endpoint(), 0,
                    msg(tensor_kind::echo, static_cast<int64_t>(prober->id()), 0, 0,
                        std::string(222, 'e'), p.a_endpoint())));
  auto reply = next_tensor(prober);
  CHECK(reply.kind == tensor_kind::echo_reply);
  CHECK(reply.step == 222);
  // A reply to the filler would have come first, on the same connection,
  // and been dropped by plane a for want of an actor 0.
  CHECK(p.a->stats().dropped_in == 0);
}

TEST_CASE("data plane: a paced plane keeps to its rate") {
  actors::data_plane::options o;
  o.rate_Bps = 4e6; // 4 MB/s: 1 MB takes at least a quarter second
  planes p{o};
  caf::scoped_actor sink{*p.sys};
  auto me = p.b_sink(sink);
  auto t0 = std::chrono::steady_clock::now();
  REQUIRE(p.a->send(p.b_endpoint(), me.id(),
                    msg(tensor_kind::all_reduce, 1, 0, 0, std::string(1000000, 'r'))));
  REQUIRE(next_tensor(sink).kind == tensor_kind::all_reduce);
  auto dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // A lower bound only (a loaded machine may take longer, never shorter).
  CHECK(dt >= 0.2);
}

TEST_CASE("data plane: a stage state takes a connection of its own, so a pipeline "
          "tensor sent after it overtakes it, and a paced plane paces the two together") {
  actors::data_plane::options o;
  o.rate_Bps = 8e6; // 8 MB/s: the 4 MB state takes half a second at least
  planes p{o};
  caf::scoped_actor sink{*p.sys};
  auto me = p.b_sink(sink);
  auto t0 = std::chrono::steady_clock::now();
  REQUIRE(p.a->send(p.b_endpoint(), me.id(),
                    msg(tensor_kind::snapshot, 3, 0, 0, std::string(4000000, 's'), "L0-2")));
  REQUIRE(p.a->send(p.b_endpoint(), me.id(),
                    msg(tensor_kind::activation, 3, 0, 0, std::string(1000, 'a'))));
  REQUIRE(p.a->send(p.b_endpoint(), me.id(),
                    msg(tensor_kind::gradient, 3, 0, 0, std::string(2000000, 'g'))));
  // Behind the state on one connection, both would come after it.
  auto first = next_tensor(sink);
  CHECK(first.kind == tensor_kind::activation);
  auto second = next_tensor(sink);
  CHECK(second.kind == tensor_kind::gradient);
  auto third = next_tensor(sink);
  CHECK(third.kind == tensor_kind::snapshot);
  CHECK(third.payload.size() == 4000000);
  auto dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // The two connections share the one rate: 6 MB at 8 MB/s. A lower bound
  // only (a loaded machine may take longer); paced apart, they would take
  // half a second.
  CHECK(dt >= 0.7);
  auto s = test::settled_stats(*p.a, [](const auto& c) { return c.frames_out >= 3; });
  CHECK(s.frames_out == 3);
  CHECK(s.dropped_out == 0);
}
