// Authenticated, encrypted nodes (docs/security.md): a cluster's keys, the
// data plane and CAF connections over TLS, and peers without the cluster's
// credentials refused in the handshake. Node processes use ports
// 27560-27579.
#include "job_test_helpers.hpp"

#include "asteroid/actors/credentials.hpp"
#include "asteroid/actors/data_plane.hpp"
#include "asteroid/actors/node.hpp"
#include "asteroid/actors/remote_probe.hpp"
#include "asteroid/actors/protocol.hpp"
#include "asteroid/serialization/tensor_wire.hpp"

#include "raw_socket.hpp"

#include <catch2/catch.hpp>

#include <openssl/ssl.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

using namespace asteroid;
using namespace std::chrono_literals;
using serialization::tensor_kind;
using serialization::tensor_message;
namespace fs = std::filesystem;

namespace {

/// A fresh folder under the test's temporary directory, removed afterwards. The process id in
/// its name keeps test cases that CTest runs in parallel out of each other's keys (with the
/// same folder, one removed the keys another was reading: seen under `ctest -j12`).
struct temp_dir {
  fs::path path;
  explicit temp_dir(const std::string& name)
    : path(fs::path(ASTEROID_TEST_TMP) /
           ("security-" + name + "-" + std::to_string(::getpid()))) {
    fs::remove_all(path);
  }
  ~temp_dir() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
  std::string member(const std::string& m) const { return (path / m).string(); }
};

/// Two clusters' keys: "ours" (members a, b, job) and "theirs" (member x).
struct two_clusters {
  temp_dir ours{"ours"}, theirs{"theirs"};
  two_clusters() {
    actors::make_cluster_keys(ours.path.string(), {"a", "b", "job"});
    actors::make_cluster_keys(theirs.path.string(), {"x"});
  }
  actors::credentials of(const std::string& m) const {
    return actors::credentials::from_folder(ours.member(m));
  }
  actors::credentials foreign() const {
    return actors::credentials::from_folder(theirs.member("x"));
  }
};

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

tensor_message activation(int64_t step, std::string payload) {
  tensor_message m;
  m.kind = tensor_kind::activation;
  m.step = step;
  m.payload = std::move(payload);
  return m;
}

/// The next tensor `self` receives within `wait` (kind 0: none).
tensor_message next_tensor(caf::scoped_actor& self,
                           std::chrono::milliseconds wait = 10s) {
  tensor_message got;
  got.kind = static_cast<tensor_kind>(0);
  self->receive([&](actors::tensor_atom, tensor_message& m) { got = std::move(m); },
                caf::after(wait) >> [] {});
  return got;
}

/// An actor system of this test process and an actor in it that data
/// planes deliver to.
struct local_sink {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  std::unique_ptr<caf::scoped_actor> self;
  caf::actor me;
  local_sink() {
    actors::configure(cfg);
    sys = std::make_unique<caf::actor_system>(cfg);
    self = std::make_unique<caf::scoped_actor>(*sys);
    me = caf::actor_cast<caf::actor>(*self);
  }
};

/// A number field of /proc/PID/status ("VmRSS", in KiB; "Threads").
int64_t status_field(int pid, const std::string& field) {
  std::ifstream in{"/proc/" + std::to_string(pid) + "/status"};
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field + ":", 0) == 0)
      return std::stoll(line.substr(field.size() + 1));
  return -1;
}

int64_t resident_kib(int pid) { return status_field(pid, "VmRSS"); }

} // namespace

TEST_CASE("keys: members of a cluster check against its CA, nobody else's do") {
  two_clusters k;
  for (auto m : {"a", "b", "job"})
    CHECK_NOTHROW(k.of(m).check());
  // Private keys readable by their owner only.
  struct stat st {};
  REQUIRE(::stat((k.ours.path / "a" / "key.pem").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  REQUIRE(::stat((k.ours.path / "ca.key").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);

  auto mixed = k.of("a");
  mixed.key = k.of("b").key;
  CHECK_THAT(error_of([&] { mixed.check(); }),
             Catch::Contains("does not belong to certificate"));
  auto other_ca = k.foreign();
  other_ca.ca = k.of("a").ca;
  CHECK_THAT(error_of([&] { other_ca.check(); }),
             Catch::Contains("is not valid for CA"));
  auto missing = k.of("a");
  missing.cert = k.ours.member("nobody") + "/cert.pem";
  CHECK_THAT(error_of([&] { missing.check(); }),
             Catch::Contains("cannot read certificate") && Catch::Contains("nobody"));
  auto garbage = k.of("a");
  garbage.ca = k.of("a").key; // a key is no certificate
  CHECK_THAT(error_of([&] { garbage.check(); }),
             Catch::Contains("is not a PEM certificate"));

  // A cluster's keys are never replaced by accident; members are added.
  CHECK_THAT(error_of([&] { actors::make_cluster_keys(k.ours.path.string(), {"c"}); }),
             Catch::Contains("already holds a cluster CA"));
  CHECK_THAT(error_of([&] { actors::add_cluster_members(k.ours.path.string(), {"a"}); }),
             Catch::Contains("exists already"));
  CHECK_THAT(error_of([&] { actors::add_cluster_members(k.ours.path.string(), {"../c"}); }),
             Catch::Contains("bad member name"));
  actors::add_cluster_members(k.ours.path.string(), {"c"});
  CHECK_NOTHROW(k.of("c").check());
}

TEST_CASE("data plane with credentials: members exchange frames, others are "
          "refused in the handshake") {
  two_clusters k;
  local_sink local;
  auto& sink = *local.self;
  auto me = local.me;
  auto start = [&](actors::credentials c) {
    actors::data_plane::options o;
    o.tls = std::move(c);
    o.handshake_timeout = 2s;
    return actors::data_plane::start(o);
  };
  auto a = start(k.of("a"));
  auto b = start(k.of("b"));
  b->add_sink(me);
  auto b_at = "127.0.0.1:" + std::to_string(b->port());
  std::string big(3 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i)
    big[i] = static_cast<char>(i * 131 % 251);
  REQUIRE(a->send(b_at, me.id(), activation(1, "small")));
  REQUIRE(a->send(b_at, me.id(), activation(2, big)));
  REQUIRE(a->send(b_at, me.id(), activation(3, "")));
  auto m = next_tensor(sink);
  CHECK((m.step == 1 && m.payload == "small"));
  m = next_tensor(sink);
  CHECK((m.step == 2 && m.payload == big));
  m = next_tensor(sink);
  CHECK((m.step == 3 && m.payload.empty()));

  SECTION("another cluster's member") {
    auto x = start(k.foreign());
    x->send(b_at, me.id(), activation(4, "from x"));
    CHECK(next_tensor(sink, 1500ms).kind == static_cast<tensor_kind>(0));
    CHECK(b->stats().refused_handshakes >= 1);
    CHECK(x->stats().frames_out == 0);
    x->stop();
  }
  SECTION("a data plane without credentials") {
    auto plain = actors::data_plane::start({});
    plain->send(b_at, me.id(), activation(5, "plain"));
    CHECK(next_tensor(sink, 1500ms).kind == static_cast<tensor_kind>(0));
    CHECK(b->stats().refused_handshakes >= 1);
    plain->stop();
  }
  SECTION("raw bytes: a frame header claiming 1 GiB is not read as one") {
    serialization::frame_header h;
    h.kind = tensor_kind::activation;
    h.destination = me.id();
    h.payload_size = uint64_t{1} << 30;
    auto raw = serialization::encode_frame_header(h);
    CHECK(test::peer_closes_after(b->port(), std::string(raw.begin(), raw.end())));
    CHECK(b->stats().refused_handshakes >= 1);
    CHECK(b->stats().frames_in == 3);
  }
  SECTION("a silent peer is dropped after the handshake timeout") {
    CHECK(test::peer_closes_after(b->port(), ""));
  }
  SECTION("large frames back to back arrive whole and in order") {
    // More than a socket takes at once: records wait in the sender's gather
    // buffer and writes resume where the socket stopped them
    // (tls_session.hpp).
    std::vector<std::string> payloads;
    for (int f = 0; f < 12; ++f) {
      std::string p(3 << 20, '\0');
      for (size_t i = 0; i < p.size(); ++i)
        p[i] = static_cast<char>((i * 131 + static_cast<size_t>(f) * 7) % 251);
      payloads.push_back(p);
      REQUIRE(a->send(b_at, me.id(), activation(100 + f, std::move(p))));
    }
    for (int f = 0; f < 12; ++f) {
      m = next_tensor(sink);
      CHECK(m.step == 100 + f);
      CHECK(m.payload == payloads[static_cast<size_t>(f)]);
    }
  }
  // The members still talk.
  REQUIRE(a->send(b_at, me.id(), activation(6, "after")));
  m = next_tensor(sink);
  CHECK((m.step == 6 && m.payload == "after"));
  a->stop();
  b->stop();
}

TEST_CASE("data plane with credentials: a connection is AES-128-GCM even with "
          "a peer that prefers AES-256-GCM (OpenSSL's own order)") {
  two_clusters k;
  actors::data_plane::options o;
  o.tls = k.of("b");
  auto b = actors::data_plane::start(o);
  const auto a = k.of("a");
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  REQUIRE(ctx);
  REQUIRE(SSL_CTX_set_ciphersuites(ctx, "TLS_AES_256_GCM_SHA384:TLS_AES_128_GCM_SHA256") == 1);
  REQUIRE(SSL_CTX_use_certificate_chain_file(ctx, a.cert.c_str()) == 1);
  REQUIRE(SSL_CTX_use_PrivateKey_file(ctx, a.key.c_str(), SSL_FILETYPE_PEM) == 1);
  REQUIRE(SSL_CTX_load_verify_locations(ctx, a.ca.c_str(), nullptr) == 1);
  int fd = test::connect_loopback(b->port());
  REQUIRE(fd >= 0);
  timeval five{5, 0}; // a handshake that stalls fails the test, not hangs it
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &five, sizeof five);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &five, sizeof five);
  SSL* ssl = SSL_new(ctx);
  SSL_set_fd(ssl, fd);
  const int connected = SSL_connect(ssl);
  const std::string cipher = connected == 1 ? SSL_get_cipher_name(ssl) : "no handshake";
  SSL_free(ssl);
  ::close(fd);
  SSL_CTX_free(ctx);
  b->stop();
  CHECK(cipher == "TLS_AES_128_GCM_SHA256");
}

TEST_CASE("data plane with credentials: members' connections closed for "
          "another job's frames give their places back") {
  two_clusters k;
  local_sink local;
  auto me = local.me;
  actors::data_plane::options o;
  o.tls = k.of("b");
  o.max_incoming = 4;
  auto b = actors::data_plane::start(o);
  b->serve_job(7);
  b->add_sink(me);
  auto b_at = "127.0.0.1:" + std::to_string(b->port());
  actors::data_plane::options member;
  member.tls = k.of("a");
  // Six members still sending a finished job's frames, one connection each:
  // each passes the handshake and is closed at its first header. (Their
  // links try again, backing off, until their heal timeout.)
  member.heal_timeout = 500ms;
  std::vector<std::shared_ptr<actors::data_plane>> stale;
  for (int i = 0; i < 6; ++i) {
    stale.push_back(actors::data_plane::start(member));
    auto m = activation(1, "old");
    m.job = 8;
    REQUIRE(stale.back()->send(b_at, me.id(), m));
  }
  for (int i = 0; i < 200 && b->stats().bad_connections < 6; ++i)
    std::this_thread::sleep_for(10ms);
  REQUIRE(b->stats().bad_connections >= 6);
  // The current job's member gets in: the closed connections hold no place.
  auto fresh = actors::data_plane::start(member);
  auto m = activation(2, "new");
  m.job = 7;
  REQUIRE(fresh->send(b_at, me.id(), m));
  auto got = next_tensor(*local.self);
  CHECK((got.step == 2 && got.payload == "new"));
  // The stale links give up: a refused frame is not written forever.
  auto dropped = [&] {
    int64_t n = 0;
    for (auto& p : stale)
      n += p->stats().dropped_out;
    return n;
  };
  for (int i = 0; i < 300 && dropped() < 6; ++i)
    std::this_thread::sleep_for(10ms);
  CHECK(dropped() == 6);
  for (auto& p : stale)
    p->stop();
  fresh->stop();
  b->stop();
}

TEST_CASE("data plane with credentials: a probe echo comes back on the "
          "prober's own connection") {
  two_clusters k;
  local_sink local;
  auto& sink = *local.self;
  auto me = local.me;
  actors::data_plane::options o;
  o.tls = k.of("a");
  auto a = actors::data_plane::start(o);
  o.tls = k.of("b");
  auto b = actors::data_plane::start(o);
  a->add_sink(me);
  for (int i = 0; i < 3; ++i) {
    tensor_message m;
    m.kind = tensor_kind::echo;
    m.step = static_cast<int64_t>(me.id());
    m.key = "127.0.0.1:" + std::to_string(a->port());
    m.payload = std::string(size_t{1} << (10 * i), 'e'); // 1 B, 1 KiB, 1 MiB
    REQUIRE(a->send("127.0.0.1:" + std::to_string(b->port()), 0, m));
    auto r = next_tensor(sink);
    CHECK(r.kind == tensor_kind::echo_reply);
    CHECK(r.step == int64_t{1} << (10 * i));
  }
  a->stop();
  b->stop();
}

namespace {

/// A local cluster whose nodes accept only TLS with throw-away credentials.
actors::local_cluster::options tls_cluster(int nodes, uint16_t port) {
  auto o = test::cluster_options(nodes, port);
  o.tls = true;
  return o;
}

actors::net_options with_credentials(const std::string& folder) {
  actors::net_options net;
  if (!folder.empty())
    net.tls = actors::credentials::from_folder(folder);
  return net;
}

/// Round trips of `n` heartbeats to `device`, `pause` apart, in ms, sorted.
std::vector<double> heartbeat_round_trips(caf::scoped_actor& self,
                                          const actors::device_actor& device, int n,
                                          std::chrono::milliseconds pause = 0ms) {
  std::vector<double> rtt_ms;
  for (int64_t i = 0; i < n; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    std::string error;
    self->request(device, 5s, actors::heartbeat_atom::value, i)
      .receive([&](actors::heartbeat_atom, int64_t) {},
               [&](caf::error& e) { error = self->system().render(e); });
    if (!error.empty())
      FAIL("heartbeat " << i << ": " << error);
    rtt_ms.push_back(std::chrono::duration<double, std::milli>(
                       std::chrono::steady_clock::now() - t0)
                       .count());
    std::this_thread::sleep_for(pause);
  }
  std::sort(rtt_ms.begin(), rtt_ms.end());
  return rtt_ms;
}

/// Whether a small link probe crosses the data plane both ways between the
/// first two `devices` (each node connects to the other's listener).
bool probes_both_ways(caf::actor_system& sys, const std::vector<actors::device_actor>& devices,
                      const std::vector<std::string>& endpoints) {
  actors::link_probe_options lp;
  lp.bytes = 1 << 16;
  lp.repeats = 2;
  auto measured = actors::measure_cluster(sys, devices, endpoints, 0, lp);
  return measured.bandwidth(0, 1) > 0 && measured.bandwidth(1, 0) > 0;
}

/// The data-plane port `device` reports (`ast_caps`); 0 when it has none.
uint16_t data_port_of(caf::scoped_actor& self, const actors::device_actor& device) {
  std::string caps;
  self->request(device, 5s, actors::caps_atom::value)
    .receive([&](std::string& s) { caps = std::move(s); },
             [&](caf::error& e) { FAIL(self->system().render(e)); });
  return static_cast<uint16_t>(nlohmann::json::parse(caps).value("data_port", int64_t{0}));
}

/// `n` connections to 127.0.0.1:`port` that send nothing (those made).
std::vector<int> silent_connections(uint16_t port, int n) {
  std::vector<int> fds;
  for (int i = 0; i < n; ++i)
    if (int fd = test::connect_loopback(port); fd >= 0)
      fds.push_back(fd);
  return fds;
}

} // namespace

TEST_CASE("nodes with credentials: the cluster's members drive them and they "
          "reach each other, strangers are dropped in the handshake") {
  actors::local_cluster cluster{tls_cluster(2, 27560)};
  REQUIRE_FALSE(cluster.credentials_folder().empty());
  // A throw-away cluster keeps its CA certificate, not the key that signs
  // members: a folder left behind makes no new member.
  const auto keys = std::filesystem::path(cluster.credentials_folder()).parent_path();
  CHECK(std::filesystem::exists(keys / "ca.pem"));
  CHECK_FALSE(std::filesystem::exists(keys / "ca.key"));
  caf::actor_system_config cfg;
  actors::configure(cfg, with_credentials(cluster.credentials_folder()));
  caf::actor_system sys{cfg};
  auto devices = actors::connect_all(sys, cluster.endpoints(), 5s);
  // Both directions between the two nodes: each opens a CAF connection to
  // the other, and CAF closes one of the two (which lost every message
  // between them before openssl_error_queue.cpp).
  CHECK(probes_both_ways(sys, devices, cluster.endpoints()));

  const auto before = resident_kib(cluster.pids()[0]);
  two_clusters foreign_keys;
  for (int round = 0; round < 10; ++round) {
    // A CAF client without credentials, and one of another cluster.
    {
      caf::actor_system_config scfg;
      actors::configure(scfg, with_credentials(""));
      caf::actor_system stranger{scfg};
      CHECK_THAT(error_of([&] {
                   actors::connect(stranger, "127.0.0.1", 27560, 3s);
                 }),
                 Catch::Contains("disconnect_during_handshake"));
    }
    {
      // The foreign client refuses the node's certificate itself; when the
      // node answers before CAF's first SSL_connect returns, CAF reports
      // that as cannot_connect_to_node (seen on a loaded CI host).
      caf::actor_system_config scfg;
      actors::configure(scfg,
                        with_credentials(foreign_keys.theirs.member("x")));
      caf::actor_system stranger{scfg};
      CHECK_THAT(error_of([&] {
                   actors::connect(stranger, "127.0.0.1", 27560, 3s);
                 }),
                 Catch::Contains("disconnect_during_handshake")
                   || Catch::Contains("this program's CA"));
    }
    // A BASP header claiming 4 GiB, sent before any handshake.
    std::string basp(64, '\0');
    basp[0] = 0; // server handshake operation
    for (int i = 0; i < 4; ++i)
      basp[4 + i] = '\xff';
    CHECK(test::peer_closes_after(27560, basp));
  }
  // The node still serves its member, and held nothing of the strangers.
  caf::scoped_actor self{sys};
  std::string caps;
  self->request(devices[0], 5s, actors::caps_atom::value)
    .receive([&](std::string& s) { caps = std::move(s); },
             [&](caf::error& e) { FAIL(sys.render(e)); });
  CHECK_THAT(caps, Catch::Contains("node0"));
  const auto after = resident_kib(cluster.pids()[0]);
  INFO("node0 resident " << before << " KiB before, " << after << " KiB after");
  CHECK(after - before < 16 * 1024);

  // 200 idle connections to its data plane: it answers heartbeats as
  // before, with no thread and little memory for them.
  auto data_port = static_cast<uint16_t>(
    nlohmann::json::parse(caps).value("data_port", int64_t{0}));
  REQUIRE(data_port > 0);
  const int pid = cluster.pids()[0];
  const auto threads_before = status_field(pid, "Threads");
  const auto kib_before = resident_kib(pid);
  auto idle = silent_connections(data_port, 200);
  CHECK(idle.size() == 200);
  auto rtt_ms = heartbeat_round_trips(self, devices[0], 20);
  const auto threads_during = status_field(pid, "Threads");
  const auto kib_during = resident_kib(pid);
  for (int fd : idle)
    ::close(fd);
  INFO("heartbeat round trips with 200 idle connections: median "
       << rtt_ms[rtt_ms.size() / 2] << " ms, max " << rtt_ms.back() << " ms; threads "
       << threads_before << " -> " << threads_during << "; resident " << kib_before
       << " -> " << kib_during << " KiB");
  CHECK(rtt_ms[rtt_ms.size() / 2] < 100);
  CHECK(threads_during - threads_before < 8);
  CHECK(kib_during - kib_before < 64 * 1024);
  // And serves normally once they are gone: probes over the data plane.
  CHECK(probes_both_ways(sys, devices, cluster.endpoints()));
}

TEST_CASE("a node process out of file descriptors keeps answering "
          "heartbeats, backs off, and serves normally once the sockets close") {
  actors::local_cluster cluster{tls_cluster(2, 27573)};
  caf::actor_system_config cfg;
  actors::configure(cfg, with_credentials(cluster.credentials_folder()));
  caf::actor_system sys{cfg};
  auto devices = actors::connect_all(sys, cluster.endpoints(), 5s);
  caf::scoped_actor self{sys};
  const auto data_port = data_port_of(self, devices[0]);
  REQUIRE(data_port > 0);
  const int pid = cluster.pids()[0];

  // Leave node 0 sixteen descriptors beyond what it holds now (prlimit(2)
  // on the running process), fewer than the incoming connections it would
  // otherwise keep (64): 200 connections then run it out of descriptors.
  auto open_descriptors = [&] {
    return std::distance(fs::directory_iterator("/proc/" + std::to_string(pid) + "/fd"),
                         fs::directory_iterator{});
  };
  rlimit low{};
  REQUIRE(::prlimit(pid, RLIMIT_NOFILE, nullptr, &low) == 0);
  low.rlim_cur = static_cast<rlim_t>(open_descriptors() + 16);
  REQUIRE(::prlimit(pid, RLIMIT_NOFILE, &low, nullptr) == 0);

  const auto threads_before = status_field(pid, "Threads");
  const auto kib_before = resident_kib(pid);
  auto flood = silent_connections(data_port, 200);
  CHECK(flood.size() == 200);
  auto rtt_ms = heartbeat_round_trips(self, devices[0], 30, 50ms);
  const auto threads_during = status_field(pid, "Threads");
  const auto kib_during = resident_kib(pid);
  const auto descriptors_during = open_descriptors();
  for (int fd : flood)
    ::close(fd);
  INFO("descriptor limit " << low.rlim_cur << ", " << descriptors_during
       << " open during the flood; heartbeat round trips: median "
       << rtt_ms[rtt_ms.size() / 2] << " ms, max " << rtt_ms.back()
       << " ms; threads " << threads_before << " -> " << threads_during
       << "; resident " << kib_before << " -> " << kib_during << " KiB");
  CHECK(rtt_ms[rtt_ms.size() / 2] < 100);
  CHECK(threads_during - threads_before < 8);
  CHECK(kib_during - kib_before < 64 * 1024);
  // It ran out (its log says so) and backed off instead of spinning.
  CHECK_THAT(test::slurp(cluster.log_path(0)),
             Catch::Contains("cannot accept a connection: Too many open files"));

  // Serves normally once they are gone: probes both ways over the data
  // plane (node 1 connects to node 0's listener, node 0 out to node 1).
  CHECK(probes_both_ways(sys, devices, cluster.endpoints()));
}

TEST_CASE("a job on nodes with credentials trains to the single-device "
          "weights (TLS on CAF and the data plane)") {
  actors::local_cluster cluster{tls_cluster(3, 27565)};
  auto train = test::synthetic(12 * 6);
  // Stage 0 on nodes 0 and 1 (an all-reduce between them), stage 1 on 2.
  auto job = test::base_job("mlp", test::make_plan(12, 2, {{0, 2, {0, 1}, {2, 4}},
                                                           {2, 3, {2}, {6}}}));
  job.max_steps = 6;
  job.nodes = cluster.endpoints();
  job.credentials = cluster.credentials_folder();
  caf::actor_system_config cfg;
  actors::configure(cfg, actors::net_of(job));
  caf::actor_system sys{cfg};
  auto devices = actors::connect_all(sys, job.nodes, 5s);
  // Strangers knock on node 0's CAF and data-plane ports all through the job.
  int64_t data_port = 0;
  {
    caf::scoped_actor self{sys};
    self->request(devices[0], 5s, actors::caps_atom::value)
      .receive([&](std::string& s) {
                 data_port = nlohmann::json::parse(s).value("data_port", int64_t{0});
               },
               [&](caf::error& e) { FAIL(sys.render(e)); });
  }
  REQUIRE(data_port > 0);
  std::atomic<bool> job_done{false};
  std::atomic<int> knocks{0}, let_in{0};
  std::thread strangers{[&] {
    caf::actor_system_config scfg;
    actors::configure(scfg);
    caf::actor_system stranger{scfg};
    while (!job_done) {
      try {
        actors::connect(stranger, "127.0.0.1", 27565, 2s);
        ++let_in;
      } catch (const std::exception&) {
      }
      std::string frame(64, '\x7f');
      if (!test::peer_closes_after(static_cast<uint16_t>(data_port), frame))
        ++let_in;
      ++knocks;
    }
  }};
  actors::job_result r;
  try {
    r = actors::run_job(sys, job, devices, test::fresh_model(job.model, job.seed),
                        train, nullptr);
  } catch (...) {
    job_done = true;
    strangers.join();
    throw;
  }
  job_done = true;
  strangers.join();
  CHECK(knocks > 0);
  CHECK(let_in == 0);
  CHECK(r.steps == 6);
  auto diff = test::max_abs_diff(r.model, test::reference(job, *train));
  INFO("max abs diff " << diff);
  CHECK(diff < 1e-4);
}

TEST_CASE("a program without the cluster's credentials cannot run a job on "
          "its nodes, and says why") {
  actors::local_cluster cluster{tls_cluster(1, 27569)};
  auto job = test::base_job("mlp", test::make_plan(8, 1, {{0, 3, {0}, {8}}}));
  job.nodes = cluster.endpoints();
  job.dataset = "synthetic-images";
  job.synthetic_count = 64;
  CHECK_THAT(error_of([&] { actors::run_job(job); }),
             Catch::Contains("cannot connect to node 127.0.0.1:27569")
               && Catch::Contains("give this program the cluster's credentials"));
}

TEST_CASE("a node process on plain TCP: 2 GiB header claims and echo frames that "
          "name another address cost it neither threads nor memory, and it keeps "
          "answering heartbeats, connects nowhere, and serves normally after") {
  // Plain TCP (a loopback cluster without credentials): what a member of the
  // job, or anyone on an --insecure deployment, can send a node's data plane.
  actors::local_cluster cluster{test::cluster_options(2, 27563)};
  caf::actor_system_config cfg;
  actors::configure(cfg);
  caf::actor_system sys{cfg};
  auto devices = actors::connect_all(sys, cluster.endpoints(), 5s);
  caf::scoped_actor self{sys};
  const auto data_port = data_port_of(self, devices[0]);
  REQUIRE(data_port > 0);
  const int pid = cluster.pids()[0];

  // A listener at the address the echoes name: nobody may connect to it.
  uint16_t lure_port = 0;
  int lure = test::listen_loopback(lure_port, 8);
  REQUIRE(lure >= 0);
  const std::string lure_at = "127.0.0.1:" + std::to_string(lure_port);

  const auto threads_before = status_field(pid, "Threads");
  const auto kib_before = resident_kib(pid);
  // 48 claims and 16 echoes: as many connections as a node holds (64).
  std::vector<int> claims, echoes;
  for (int i = 0; i < 48; ++i) {
    // A header claiming 2 GiB, then 10 bytes of it. An idle node's
    // snapshot store takes up to its memory budget (4 GiB), so the claim
    // stands and the node holds what arrived (and one small first piece).
    serialization::frame_header h;
    h.kind = tensor_kind::activation;
    h.destination = 1;
    h.payload_size = (uint64_t{1} << 31) - 1;
    auto raw = serialization::encode_frame_header(h);
    auto bytes = std::string(raw.begin(), raw.end()) + std::string(10, 'p');
    if (int fd = test::connect_loopback(data_port); fd >= 0) {
      CHECK(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL)
            == static_cast<ssize_t>(bytes.size()));
      claims.push_back(fd);
    }
    if (i >= 16)
      continue;
    // A probe echo whose key names the lure.
    tensor_message echo;
    echo.kind = tensor_kind::echo;
    echo.step = 7;
    echo.key = lure_at;
    echo.payload = std::string(1000 + i, 'e');
    auto eh = serialization::frame_header_of(echo, 0);
    eh.link = 1000 + static_cast<uint64_t>(i);
    eh.sequence = 1;
    auto eraw = serialization::encode_frame_header(eh);
    auto frame = std::string(eraw.begin(), eraw.end()) + echo.key + echo.payload;
    if (int fd = test::connect_loopback(data_port); fd >= 0) {
      CHECK(::send(fd, frame.data(), frame.size(), MSG_NOSIGNAL)
            == static_cast<ssize_t>(frame.size()));
      echoes.push_back(fd);
    }
  }
  CHECK(claims.size() == 48);
  CHECK(echoes.size() == 16);
  auto rtt_ms = heartbeat_round_trips(self, devices[0], 30, 20ms);
  const auto threads_during = status_field(pid, "Threads");
  const auto kib_during = resident_kib(pid);
  // Each echo is answered on its own connection (bytes come back there).
  int answered = 0;
  for (int fd : echoes) {
    pollfd pf{fd, POLLIN, 0};
    answered += ::poll(&pf, 1, 2000) == 1;
  }
  pollfd lured{lure, POLLIN, 0};
  const bool nobody_connected = ::poll(&lured, 1, 300) == 0;
  for (int fd : claims)
    ::close(fd);
  for (int fd : echoes)
    ::close(fd);
  ::close(lure);
  INFO("heartbeat round trips: median " << rtt_ms[rtt_ms.size() / 2] << " ms, max "
       << rtt_ms.back() << " ms; threads " << threads_before << " -> " << threads_during
       << "; resident " << kib_before << " -> " << kib_during << " KiB; " << answered
       << " of 16 echoes answered");
  CHECK(rtt_ms[rtt_ms.size() / 2] < 100);
  CHECK(threads_during - threads_before < 8);
  CHECK(kib_during - kib_before < 64 * 1024);
  CHECK(answered == 16);
  CHECK(nobody_connected);
  // And serves normally once they are gone.
  CHECK(probes_both_ways(sys, devices, cluster.endpoints()));
}

TEST_CASE("with credentials too, a second job against a node busy with a job is "
          "refused naming the node, and the first job's snapshots stay") {
  actors::local_cluster cluster{tls_cluster(1, 27562)};
  caf::actor_system_config cfg;
  actors::configure(cfg, with_credentials(cluster.credentials_folder()));
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  auto node = actors::connect_device(sys, "127.0.0.1", 27562, 5s);
  // The first job (a member of the cluster) claims the node and stores a
  // snapshot there.
  std::string claimed = "no reply";
  self->request(node, 5s, actors::claim_atom::value, int64_t{111}, int64_t{10}, int64_t{0})
    .receive([&](std::string& e, int64_t) { claimed = e; },
             [&](caf::error& e) { claimed = sys.render(e); });
  REQUIRE(claimed.empty());
  tensor_message m;
  m.kind = tensor_kind::snapshot;
  m.job = 111;
  m.key = "L0-2";
  m.step = 0;
  m.payload = serialization::encode_tensors({{"w", torch::ones({4})}});
  self->send(node, actors::tensor_atom::value, std::move(m));
  auto inventory = [&] {
    std::string out = "no reply";
    self->request(node, 5s, actors::inventory_atom::value, int32_t{0})
      .receive([&](actors::inventory_atom, int32_t, std::string& text) { out = text; },
               [&](caf::error& e) { out = "error: " + sys.render(e); });
    return out;
  };
  REQUIRE(inventory() == R"({"L0-2":[0]})");

  // A second job with the same valid credentials.
  auto job = test::base_job("mlp", test::make_plan(8, 1, {{0, 3, {0}, {8}}}));
  job.nodes = cluster.endpoints();
  job.credentials = cluster.credentials_folder();
  job.dataset = "synthetic-images";
  job.synthetic_count = 64;
  job.max_steps = 2;
  CHECK_THAT(error_of([&] { actors::run_job(job); }),
             Catch::Contains("node 127.0.0.1:27562 cannot serve this job: node0 refused job")
               && Catch::Contains("busy with another job (job 111)"));
  CHECK(inventory() == R"({"L0-2":[0]})");
}
