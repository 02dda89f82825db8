// The one transport interface (actors/channel.hpp): both backends deliver
// the same (tensor_atom, tensor_message) to the receiver, and the choice
// made at deployment falls back to CAF where TCP cannot be used.
#include "asteroid/actors/channel.hpp"
#include "asteroid/actors/data_plane.hpp"
#include "asteroid/actors/protocol.hpp"

#include <catch2/catch.hpp>

using namespace asteroid;
using namespace std::chrono_literals;
using serialization::tensor_kind;
using serialization::tensor_message;

namespace {

tensor_message sample(int32_t mb) {
  tensor_message m;
  m.kind = tensor_kind::gradient;
  m.generation = 3;
  m.step = 11;
  m.micro_batch = mb;
  m.piece = 2;
  m.sender = 1;
  m.key = "L0-2";
  m.payload = std::string(100000 + static_cast<size_t>(mb), 'g');
  return m;
}

/// What `self` receives within 10 s, and from whom (kind 0: nothing).
std::pair<tensor_message, caf::actor_addr> next_tensor_and_sender(caf::scoped_actor& self) {
  std::pair<tensor_message, caf::actor_addr> got;
  got.first.kind = static_cast<tensor_kind>(0);
  self->receive(
    [&](actors::tensor_atom, tensor_message& m) {
      got = {std::move(m), caf::actor_cast<caf::actor_addr>(self->current_sender())};
    },
    caf::after(10s) >> [] {});
  return got;
}

void check_same(const tensor_message& got, const tensor_message& sent) {
  CHECK(got.kind == sent.kind);
  CHECK(got.generation == sent.generation);
  CHECK(got.step == sent.step);
  CHECK(got.micro_batch == sent.micro_batch);
  CHECK(got.piece == sent.piece);
  CHECK(got.sender == sent.sender);
  CHECK(got.key == sent.key);
  CHECK(got.payload == sent.payload);
}

} // namespace

TEST_CASE("channel: the CAF and the TCP backend deliver the same message") {
  caf::actor_system_config cfg;
  actors::configure(cfg);
  caf::actor_system sys{cfg};
  auto here = actors::data_plane::start({});
  auto there = actors::data_plane::start({});
  caf::scoped_actor sender{sys};
  caf::scoped_actor receiver{sys};
  auto to = caf::actor_cast<caf::actor>(receiver);
  there->add_sink(to);
  auto endpoint = "127.0.0.1:" + std::to_string(there->port());

  auto caf_link = actors::make_caf_channel(to);
  auto tcp_link = actors::make_tcp_channel(here, endpoint, to.id());
  CHECK(std::string(caf_link->transport()) == "caf");
  CHECK(std::string(tcp_link->transport()) == "tcp");
  CHECK(tcp_link->describe().find(endpoint) != std::string::npos);

  CHECK(caf_link->send(sender.ptr(), sample(0)).empty());
  auto [by_caf, from] = next_tensor_and_sender(receiver);
  check_same(by_caf, sample(0));
  CHECK(from == sender->address()); // a CAF receiver can answer it
  for (int mb = 1; mb <= 3; ++mb)
    CHECK(tcp_link->send(sender.ptr(), sample(mb)).empty());
  for (int mb = 1; mb <= 3; ++mb) // in order
    check_same(next_tensor_and_sender(receiver).first, sample(mb));
  here->stop();
  there->stop();
}

TEST_CASE("channel: a link is TCP only with a data plane and a valid "
          "endpoint, else CAF") {
  caf::actor_system_config cfg;
  actors::configure(cfg);
  caf::actor_system sys{cfg};
  auto dp = actors::data_plane::start({});
  caf::scoped_actor receiver{sys};
  auto to = caf::actor_cast<caf::actor>(receiver);
  auto endpoint = "127.0.0.1:" + std::to_string(dp->port());
  CHECK(std::string(actors::open_channel(to, dp, endpoint)->transport()) == "tcp");
  CHECK(std::string(actors::open_channel(to, dp, "")->transport()) == "caf");
  CHECK(std::string(actors::open_channel(to, nullptr, endpoint)->transport()) == "caf");
  CHECK(std::string(actors::open_channel(to, dp, "no-port")->transport()) == "caf");
  CHECK_THROWS_WITH(actors::make_tcp_channel(nullptr, endpoint, 1),
                    Catch::Contains("data plane"));
  CHECK_THROWS_WITH(actors::make_tcp_channel(dp, "host:notaport", 1),
                    Catch::Contains("host:notaport"));
  // A CAF channel without a receiver says so instead of losing the message
  // silently.
  caf::scoped_actor sender{sys};
  CHECK(!actors::make_caf_channel(caf::actor{})->send(sender.ptr(), sample(0)).empty());
  dp->stop();
}
