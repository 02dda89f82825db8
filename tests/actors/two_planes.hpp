#pragma once
// Two data planes in one test process on loopback, the second delivering to
// a scoped actor of the test: the fixture of the data-plane tests.
#include "asteroid/actors/data_plane.hpp"
#include "asteroid/actors/protocol.hpp"

#include <caf/all.hpp>

#include <chrono>
#include <memory>
#include <string>

namespace asteroid::test {

struct two_planes {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  std::unique_ptr<caf::scoped_actor> self;
  caf::actor me;
  std::shared_ptr<actors::data_plane> a, b;
  explicit two_planes(actors::data_plane::options o = {}) {
    actors::configure(cfg);
    sys = std::make_unique<caf::actor_system>(cfg);
    self = std::make_unique<caf::scoped_actor>(*sys);
    me = caf::actor_cast<caf::actor>(*self);
    a = actors::data_plane::start(o);
    b = actors::data_plane::start(o);
    b->add_sink(me);
  }
  ~two_planes() {
    a->stop();
    b->stop();
  }
  std::string b_at() const { return "127.0.0.1:" + std::to_string(b->port()); }
  /// An activation of step `step` from a to b's sink.
  bool send_to_b(int64_t step, std::string payload = "x") {
    serialization::tensor_message m;
    m.kind = serialization::tensor_kind::activation;
    m.step = step;
    m.payload = std::move(payload);
    return a->send(b_at(), me.id(), std::move(m));
  }
  /// The step of the next tensor within `wait`; -1 for none.
  int64_t next_step(std::chrono::milliseconds wait = std::chrono::seconds(10)) {
    int64_t step = -1;
    (*self)->receive(
      [&](actors::tensor_atom, serialization::tensor_message& m) { step = m.step; },
      caf::after(wait) >> [] {});
    return step;
  }
};

} // namespace asteroid::test
