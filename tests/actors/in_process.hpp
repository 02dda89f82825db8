#pragma once
// Devices in the test's own process (no node programs): what the unit-test
// binaries can use too, as they are built without the asteroid program.
#include "asteroid/actors/node.hpp"
#include "asteroid/actors/protocol.hpp"

#include <caf/all.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace asteroid::test {

/// An actor system with `n` devices in this process, each emulated
/// `slowdown` times slower than the host; device i's memory budget is
/// `memory[i]` where given.
struct in_process {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  std::vector<actors::device_actor> devices;
  explicit in_process(int n, double slowdown = 1.0,
                      const std::vector<int64_t>& memory = {}) {
    actors::configure(cfg);
    sys = std::make_unique<caf::actor_system>(cfg);
    for (int i = 0; i < n; ++i) {
      actors::device_options o;
      o.name = "dev" + std::to_string(i);
      o.slowdown = slowdown;
      if (static_cast<size_t>(i) < memory.size())
        o.memory_bytes = memory[static_cast<size_t>(i)];
      devices.push_back(actors::spawn_device(*sys, o));
    }
  }
  ~in_process() {
    for (auto& d : devices) {
      caf::anon_send(d, actors::stop_atom::value);
      caf::anon_send_exit(d, caf::exit_reason::user_shutdown);
    }
  }
};

} // namespace asteroid::test
