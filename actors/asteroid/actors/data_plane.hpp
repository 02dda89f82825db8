#pragma once
/// \file
/// The data plane: tensor bytes between node processes on the runtime's own
/// TCP connections, outside CAF's middleman.
///
/// Why: CAF 0.17 moves a 1 MiB message at a small fraction of what the same
/// loopback does with plain TCP (docs/benchmarks.md), and it serializes a
/// whole message before sending any of it. Control stays on CAF (deploy,
/// heartbeats, acks, reports, monitors); activations, gradients, all-reduce
/// chunks, inputs, labels and snapshots to other nodes go here. Every frame
/// (serialization/frame.hpp) is a tensor_message; the receiver delivers it
/// as the same `tensor_atom` message a sender in its process would have
/// sent, so actors handle one message type whichever way it came.
///
/// Shape (PipeEdge-like): one listener and one reader thread per incoming
/// connection; one writer thread per destination with a bounded queue, so a
/// replica hands its bytes over and goes back to compute. A full queue makes
/// the sender wait (backpressure), up to `queue_wait`, then the frame is
/// dropped and `send` says so. Frames for an actor that is gone are
/// dropped: after a recovery, stale frames of an old generation name actor
/// ids nobody registers again. Malformed input closes that connection only,
/// and so does a frame of a job other than the one the node serves
/// (`serve_job`), before any of its payload is read.
///
/// With the cluster's credentials (`options::tls`) every connection is TLS
/// 1.3 with a certificate of the cluster's CA on both sides; a peer without
/// one is dropped in the handshake, before any of its bytes is read as a
/// frame (credentials.hpp, docs/security.md).
#include "asteroid/actors/credentials.hpp"
#include "asteroid/serialization/frame.hpp"

#include <caf/all.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace asteroid::actors {

namespace detail {
class tls_context;
class tls_stream;
} // namespace detail

class data_plane : public std::enable_shared_from_this<data_plane> {
public:
  struct options {
    std::string host = "127.0.0.1"; ///< address to listen on
    uint16_t port = 0;              ///< 0: any free port
    /// > 0: every outgoing connection is paced to this many bytes/s
    /// (loopback emulation of a shaped link where `tc` is not available).
    double rate_Bps = 0;
    size_t queue_frames = 64;       ///< per destination
    std::chrono::milliseconds queue_wait{30000};
    std::chrono::milliseconds connect_timeout{3000};
    serialization::frame_limits limits;
    /// Empty: plain TCP. Otherwise every connection is TLS with these.
    credentials tls;
    /// A peer that connects must finish the TLS handshake within this.
    std::chrono::milliseconds handshake_timeout{5000};
  };

  struct counters {
    int64_t frames_out = 0, bytes_out = 0, frames_in = 0, bytes_in = 0;
    int64_t dropped_out = 0, dropped_in = 0, bad_connections = 0;
    /// Connections dropped in the TLS handshake (no valid certificate).
    int64_t refused_handshakes = 0;
  };

  /// Listens at once; throws std::runtime_error naming host:port on failure,
  /// std::invalid_argument naming the file on bad credentials.
  static std::shared_ptr<data_plane> start(options opts);
  ~data_plane();
  data_plane(const data_plane&) = delete;
  data_plane& operator=(const data_plane&) = delete;

  uint16_t port() const { return port_; }
  /// Frames are accepted only when they name job `job` (0: none, between
  /// jobs). Set by the node's device when a job claims or frees it.
  void serve_job(int64_t job) { job_ = job; }
  int64_t job() const { return job_; }
  /// Frames whose destination is `a.id()` are delivered to `a` until it
  /// terminates.
  void add_sink(const caf::actor& a);
  void remove_sink(caf::actor_id id);
  /// Queues `m` as one frame to actor `destination` of the data plane at
  /// `endpoint` ("host:port"). Returns false when the frame was dropped
  /// (queue still full after `queue_wait`, or stopping).
  bool send(const std::string& endpoint, caf::actor_id destination,
            serialization::tensor_message m);
  counters stats() const;
  /// Closes every connection and joins every thread; idempotent.
  void stop();

private:
  struct outgoing;
  struct incoming;
  explicit data_plane(options opts);
  void accept_loop();
  void read_loop(incoming* in);
  void write_loop(outgoing* out);
  void deliver(const serialization::frame_header& h, std::string key,
               std::string payload);
  /// Null once stopping.
  std::shared_ptr<outgoing> connection_to(const std::string& endpoint);
  template <class F>
  void count(F f) {
    std::lock_guard<std::mutex> guard{mu_};
    f(stats_);
  }

  options opts_;
  std::unique_ptr<detail::tls_context> tls_; ///< null: plain TCP
  int listener_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int64_t> job_{0};
  std::thread acceptor_;
  mutable std::mutex mu_; ///< guards sinks_, outgoing_, incoming_, stats_
  std::map<caf::actor_id, caf::actor> sinks_;
  /// Shared with senders in flight, so that stop() cannot free one under them.
  std::map<std::string, std::shared_ptr<outgoing>> outgoing_;
  std::vector<std::unique_ptr<incoming>> incoming_;
  counters stats_;
};

/// "host:port" of the data plane of the node published at `node_endpoint`
/// that reports `data_port` (`ast_caps`); empty when the port is not one.
std::string data_endpoint(const std::string& node_endpoint, int64_t data_port);

} // namespace asteroid::actors
