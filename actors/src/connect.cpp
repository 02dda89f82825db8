// The network side every process of a job shares: the middleman's settings,
// endpoints, and connecting to a node with a timeout (protocol.hpp).
#include "asteroid/actors/protocol.hpp"

#include <caf/openssl/manager.hpp>
#include <spdlog/spdlog.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace asteroid::actors {

namespace detail {
bool openssl_error_queue_fix_linked(); // openssl_error_queue.cpp
} // namespace detail

void configure(caf::actor_system_config& cfg, const net_options& net) {
  cfg.load<caf::io::middleman>();
  if (!net.tls.empty()) {
    // CAF raises a bare "cannot load certificate" on a bad file, from inside
    // the actor system's start; checking here names the file instead.
    net.tls.check();
    // CAF's OpenSSL module needs the error-queue fix: referring to it links
    // openssl_error_queue.cpp into every program that gets here.
    detail::openssl_error_queue_fix_linked();
    cfg.load<caf::openssl::manager>();
    cfg.openssl_certificate = net.tls.cert;
    cfg.openssl_key = net.tls.key;
    cfg.openssl_cafile = net.tls.ca;
  }
  add_tensor_message_type(cfg);
  // The passes in a replica's report to the micro-batch relay (protocol.hpp).
  cfg.add_message_type<std::vector<int32_t>>("std::vector<int32_t>");
  cfg.set("middleman.heartbeat-interval", caf::timespan{net.heartbeat});
  cfg.set("middleman.connection-timeout",
          caf::timespan{net.connection_timeout});
  // An idle CAF worker polls its queue every 50 us for 500 rounds before it
  // sleeps on a condition variable. A node gets a message every few ms, so
  // its workers rarely got that far and woke about 20 000 times a second,
  // preempting the compute thread on their core (a median of 69-337
  // involuntary context switches per stage backward pass in throughput_bench
  // traces; 22-66 without this phase). An idle worker now sleeps until a
  // message is enqueued for it, which wakes it through its condition
  // variable.
  cfg.set("work-stealing.moderate-poll-attempts", size_t{0});
}

bool uses_tls(caf::actor_system& sys) {
  return sys.has_openssl_manager();
}

std::pair<std::string, uint16_t> parse_endpoint(const std::string& text) {
  auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size())
    throw std::invalid_argument("endpoint '" + text
                                + "': expected HOST:PORT");
  auto port_text = text.substr(colon + 1);
  long port = -1;
  try {
    size_t used = 0;
    port = std::stol(port_text, &used);
    if (used != port_text.size())
      port = -1;
  } catch (const std::exception&) {
  }
  if (port <= 0 || port > 65535)
    throw std::invalid_argument("endpoint '" + text + "': bad port '"
                                + port_text + "'");
  return {text.substr(0, colon), static_cast<uint16_t>(port)};
}

caf::actor connect(caf::actor_system& sys, const std::string& host,
                   uint16_t port, std::chrono::milliseconds timeout) {
  // CAF 0.17.6 opens the client side of a BASP connection with `last_seen`
  // at the clock's epoch and sets it only when the server's handshake
  // arrives, so a heartbeat tick in between drops a healthy connection with
  // connection_timeout. A handshake spans a tick whenever it is slow (a
  // loaded host, a long link), so that drop is retried while time is left.
  using clock = std::chrono::steady_clock;
  auto deadline = clock::now() + timeout;
  caf::scoped_actor self{sys};
  caf::actor result;
  std::string error;
  int dropped = 0;
  for (int attempt = 1; !result; ++attempt) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - clock::now());
    bool dropped_in_handshake = false;
    self
      ->request(uses_tls(sys) ? sys.openssl_manager().actor_handle()
                              : sys.middleman().actor_handle(),
                std::max(left, std::chrono::milliseconds(1)),
                caf::connect_atom::value, host, port)
      .receive(
        [&](const caf::node_id&, caf::strong_actor_ptr& p,
            const std::set<std::string>&) {
          if (p)
            result = caf::actor_cast<caf::actor>(std::move(p));
          else
            error = "no actor published there";
        },
        [&](caf::error& e) {
          dropped_in_handshake = e == caf::sec::connection_timeout;
          error = e == caf::sec::request_timeout
                    ? "no answer within " + std::to_string(timeout.count())
                        + " ms"
                    : sys.render(e);
          // CAF's TLS client checks the node's certificate inside its
          // first SSL_connect when the node answers fast enough, and then
          // reports cannot_connect_to_node instead of a dropped handshake.
          if (e == caf::sec::cannot_connect_to_node && uses_tls(sys))
            error += " (if the node is up: with TLS, the node's certificate "
                     "is not signed by this program's CA, or the node speaks "
                     "no TLS)";
          if (e == caf::sec::disconnect_during_handshake)
            error += uses_tls(sys)
                       ? " (with TLS: a node refuses a certificate that its "
                         "cluster's CA did not sign, and a node without "
                         "credentials speaks no TLS)"
                       : " (a node with credentials accepts only TLS: give "
                         "this program the cluster's credentials)";
        });
    dropped += dropped_in_handshake;
    if (result || !dropped_in_handshake || clock::now() >= deadline)
      break;
    spdlog::warn("connecting to {}:{}: handshake dropped by CAF's heartbeat "
                 "tick (attempt {}), retrying",
                 host, port, attempt);
  }
  if (!result) {
    if (dropped > 0)
      error += " (" + std::to_string(dropped)
               + " handshakes dropped at CAF's heartbeat tick: each took "
                 "longer than one tick)";
    throw std::runtime_error("cannot connect to node " + host + ":"
                             + std::to_string(port) + ": " + error);
  }
  return result;
}

device_actor connect_device(caf::actor_system& sys, const std::string& host,
                            uint16_t port, std::chrono::milliseconds timeout) {
  return caf::actor_cast<device_actor>(connect(sys, host, port, timeout));
}

std::vector<device_actor> connect_all(caf::actor_system& sys,
                                      const std::vector<std::string>& endpoints,
                                      std::chrono::milliseconds timeout) {
  std::vector<device_actor> out;
  for (auto& e : endpoints) {
    auto [host, port] = parse_endpoint(e);
    out.push_back(connect_device(sys, host, port, timeout));
  }
  return out;
}

} // namespace asteroid::actors
