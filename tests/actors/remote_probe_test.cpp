// Measuring the cluster from the supervisor: a profile taken on a node
// (with its emulated slowdown) and the link matrix between nodes.
#include "asteroid/actors/remote_probe.hpp"
#include "in_process.hpp"
#include "job_test_helpers.hpp"

#include <catch2/catch.hpp>

using namespace asteroid;
using namespace asteroid::test;

TEST_CASE("a node profiles a model with its own slowdown, and links between "
          "nodes are measured") {
  auto opts = cluster_options(3, 27380);
  opts.slowdowns = {1.0, 3.0, 1.0};
  actors::local_cluster cluster{opts};
  caf::actor_system_config cfg;
  actors::configure(cfg);
  caf::actor_system sys{cfg};
  auto devices = actors::connect_all(sys, cluster.endpoints(), std::chrono::seconds(3));
  training::profiler_options po;
  po.batch_sizes = {1, 8};
  po.repeats = 3;
  auto prof = actors::profile_on_node(sys, devices[1], "mlp", json::object(),
                                      po, std::chrono::seconds(60));
  CHECK(prof.num_layers() == 3);
  CHECK_THAT(prof.device, Catch::Contains("node1")
                            && Catch::Contains("emulated slowdown x3"));
  for (auto& l : prof.layers)
    CHECK(l.forward_s.back() > 0);
  // An inference profile, asked of the node: forward passes alone.
  po.forward_only = true;
  auto served = actors::profile_on_node(sys, devices[1], "mlp", json::object(), po,
                                        std::chrono::seconds(60));
  REQUIRE(served.num_layers() == 3);
  for (auto& l : served.layers) {
    CHECK(l.forward_s.back() > 0);
    CHECK(l.backward_s.back() == 0);
  }
  po.forward_only = false;
  // A model the node cannot build is an error naming the node, not a crash.
  CHECK_THROWS_WITH(actors::profile_on_node(sys, devices[1], "no-such-model",
                                            json::object(), po,
                                            std::chrono::seconds(20)),
                    Catch::Contains("node1"));
  actors::link_probe_options lp;
  lp.bytes = 1 << 20;
  lp.repeats = 3;
  auto c = actors::measure_cluster(sys, devices, cluster.endpoints(), 1, lp);
  REQUIRE(c.size() == 3);
  // Speeds relative to the profiled node (slowdown 3): the others are 3x.
  CHECK(c.devices[0].speed == Approx(3.0));
  CHECK(c.devices[1].speed == Approx(1.0));
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j)
      if (i != j) {
        INFO(i << " -> " << j << ": " << c.bandwidth(i, j) << " B/s, "
                << c.latency(i, j) << " s");
        // Loopback through CAF: far above 1 MB/s, below 100 GB/s, and a
        // latency under 100 ms.
        CHECK(c.bandwidth(i, j) > 1e6);
        CHECK(c.bandwidth(i, j) < 1e11);
        CHECK(c.latency(i, j) > 0);
        CHECK(c.latency(i, j) < 0.1);
      }
  std::printf("[links] node0 -> node1: %.1f MB/s, %.3f ms one way\n",
              c.bandwidth(0, 1) / 1e6, c.latency(0, 1) * 1e3);
  // A probe to an endpoint nobody listens on fails, naming it.
  CHECK_THROWS_WITH(actors::measure_link(sys, devices[0], "127.0.0.1:27389", lp),
                    Catch::Contains("127.0.0.1:27389"));
  // Streamed: 16 payloads of 256 KiB back to back on each path.
  lp.bytes = 256 << 10;
  lp.stream = 16;
  for (auto path : {actors::probe_data_plane, actors::probe_caf}) {
    lp.path = path;
    auto m = actors::measure_link(sys, devices[0], cluster.endpoints()[2], lp);
    INFO("path " << path << ": " << m.bandwidth_Bps << " B/s");
    CHECK(m.bandwidth_Bps > 1e6);
    CHECK(m.bandwidth_Bps < 1e11);
    CHECK(m.latency_s > 0);
  }
  // A stream over 1 GiB in all is refused by the node, which says why.
  lp.bytes = 64 << 20;
  lp.stream = 17;
  CHECK_THROWS_WITH(actors::measure_link(sys, devices[0], cluster.endpoints()[2], lp),
                    Catch::Contains("stream of 17 payloads out of range"));
}

TEST_CASE("a device answers a probe's echo over CAF with its tag, but not a stream's "
          "filler") {
  // A stream's payloads but the last are echoes for actor 0, which want no
  // reply (probe_timing.hpp); the CAF path keeps to that as the data plane does.
  in_process env{1};
  caf::scoped_actor prober{*env.sys};
  auto echo = [&](int64_t reply_to, size_t bytes, int64_t tag = 0) {
    serialization::tensor_message m;
    m.kind = serialization::tensor_kind::echo;
    m.generation = tag;
    m.step = reply_to;
    m.payload = std::string(bytes, 'e');
    prober->send(env.devices[0], actors::tensor_atom::value, std::move(m));
  };
  echo(0, 111);
  echo(static_cast<int64_t>(prober->id()), 222, 9);
  int64_t answered = -1, tag = -1;
  prober->receive(
    [&](actors::tensor_atom, serialization::tensor_message& m) {
      if (m.kind == serialization::tensor_kind::echo_reply) {
        answered = m.step;
        tag = m.generation;
      }
    },
    caf::after(std::chrono::seconds(10)) >> [] {});
  CHECK(answered == 222);
  CHECK(tag == 9); // the echo's tag comes back (probe_timing.hpp, answers_echo)
}
