#pragma once
/// \file
/// Cutting and restoring a device's network link: the `cut` and `heal`
/// faults. A node in its own network namespace (the emulated testbed) reaches
/// everything through one interface on the outside, its host-side veth; taking
/// that interface down silences the node without closing a connection, which
/// is what a device walking out of Wi-Fi range looks like to its peers.
#include <string>

namespace asteroid::actors {

/// Sets network interface `name` (in this process's network namespace) up or
/// down. Needs CAP_NET_ADMIN there. Returns "" on success, else what failed
/// (no such interface, not permitted, ...), naming the interface.
std::string set_interface_up(const std::string& name, bool up);

} // namespace asteroid::actors
