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
/// Links heal: every frame to a destination carries that link's next
/// sequence number and is kept until the receiver acknowledges it (a small
/// frame back on the same connection). When a connection breaks, the link
/// connects again and writes every unacknowledged frame again, in order;
/// the receiver drops those it had delivered already. A link that cannot
/// be made again within `heal_timeout` (or whose peer refuses it) drops
/// what was pending; the first says so (`on_unreachable`): the device
/// behind it is lost, and its job's supervisor recovers
/// (docs/fault_tolerance.md). A
/// connection that falls silent (no acknowledgement from the peer's TCP for
/// `silence_timeout`) counts as broken.
///
/// Shape (PipeEdge-like, on standalone Asio): one event loop run by a small
/// fixed pool of threads (`options::io_threads`) serves the listener and
/// every connection; no thread per connection. Outgoing frames queue per
/// destination (bounded), so a replica hands its bytes over and goes back
/// to compute; a full queue makes the sender wait (backpressure), up to
/// `queue_wait`, then the frame is dropped and `send` says so. Stage states
/// (`tensor_kind::snapshot`) go to a destination on a second link and
/// connection of their own, so that the pipeline's tensors share the path
/// with them instead of waiting behind them (a paced plane paces both
/// together, at its one rate per destination). Frames for an
/// actor that is gone are dropped: after a recovery, stale frames of an old
/// generation name actor ids nobody registers again.
///
/// What a peer can make a node do is bounded: malformed input closes that
/// connection only, and so does a frame of a job other than the one the
/// node serves (`serve_job`), before any of its payload is read; payload
/// memory is committed as its bytes arrive, never on a header's word, and a
/// payload larger than its destination expects is refused unread
/// (`add_sink`);
/// incoming connections are capped (`max_incoming`: the oldest one that has
/// not yet shown itself a peer makes room, else the newcomer is closed) and
/// closed when silent (`handshake_timeout` before a first frame or the TLS
/// handshake, `idle_timeout` after); when the process runs out of file
/// descriptors the listener backs off and accepts again once some close.
/// The node connects only to the endpoints its own runtime sends to: a
/// probe echo is answered on the connection it came in on.
///
/// With the cluster's credentials (`options::tls`) every connection is TLS
/// 1.3 with a certificate of the cluster's CA on both sides; a peer without
/// one is dropped in the handshake, before any of its bytes is read as a
/// frame (credentials.hpp, docs/security.md).
#include "asteroid/actors/credentials.hpp"
#include "asteroid/serialization/frame.hpp"

#include <caf/all.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace asteroid::actors {

namespace detail {
struct data_plane_core;
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
    /// How long a link whose connection broke keeps trying to connect
    /// again (backing off up to 1 s) before it drops what is pending. A peer
    /// that refuses the connection (nothing listens) is given up at once.
    std::chrono::milliseconds heal_timeout{10000};
    /// How long data written on a connection may stay unacknowledged by
    /// the peer's TCP (TCP_USER_TIMEOUT) before the connection counts as
    /// broken. Why: a path that falls silent (a cut, no reset) closes
    /// nothing, and TCP would retransmit for about 15 minutes; with this the
    /// link notices, connects again and heals, or gives up after
    /// `heal_timeout` and says so (`on_unreachable`). A slow link is not
    /// silent: its acknowledgements keep coming. 0: the kernel's default.
    std::chrono::milliseconds silence_timeout{5000};
    serialization::frame_limits limits;
    /// Empty: plain TCP. Otherwise every connection is TLS with these.
    credentials tls;
    /// A peer that connects must finish the TLS handshake (plain TCP: send
    /// its first frame header) within this.
    std::chrono::milliseconds handshake_timeout{5000};
    /// An incoming connection silent this long after its first frame is
    /// closed; its sender connects again for its next frame.
    std::chrono::milliseconds idle_timeout{120000};
    /// Incoming connections held at once (a node's peers need one each, two
    /// while they also send it stage states).
    size_t max_incoming = 64;
    /// Threads that run every connection's I/O (and TLS) together. One
    /// read higher than two between two node processes on a 2-core host
    /// (1 MiB streams: 16-25 against 15-20 Gbit/s plain, 7.1-9.2 against
    /// 6.6-8.0 with TLS, within that host's spread; docs/benchmarks.md).
    int io_threads = 1;
  };

  struct counters {
    int64_t frames_out = 0, bytes_out = 0, frames_in = 0, bytes_in = 0;
    int64_t dropped_out = 0, dropped_in = 0, bad_connections = 0;
    /// Connections dropped in the TLS handshake (no valid certificate).
    int64_t refused_handshakes = 0;
    /// Incoming connections closed to stay within `max_incoming`, or for
    /// silence (`handshake_timeout`, `idle_timeout`).
    int64_t evicted_connections = 0, silent_connections = 0;
    /// Accepts that failed for want of resources (file descriptors),
    /// each followed by a back-off.
    int64_t accept_failures = 0;
    /// Frames written again on a new connection after the old one broke
    /// before they were acknowledged.
    int64_t resent_frames = 0;
    /// Frames that arrived again (a resend) after they had been delivered:
    /// dropped.
    int64_t duplicate_frames = 0;
    /// Frames refused (and their connections closed) for a payload larger
    /// than their destination expects (`add_sink`).
    int64_t oversized_frames = 0;
  };

  /// Listens at once; throws std::runtime_error naming host:port on failure,
  /// std::invalid_argument naming the file on bad credentials.
  static std::shared_ptr<data_plane> start(options opts);
  ~data_plane();
  data_plane(const data_plane&) = delete;
  data_plane& operator=(const data_plane&) = delete;

  uint16_t port() const;
  /// Frames are accepted only when they name job `job` (0: none, between
  /// jobs). Set by the node's device when a job claims or frees it; a
  /// change closes the connections of the job before (the next frame
  /// connects again).
  ///
  /// `path_window` > 0: while serving this job, a link gives a silent peer
  /// up about that long after the silence began (half of it as
  /// `silence_timeout`, the rest as `heal_timeout`; while a link heals, each
  /// wait for TCP to connect is cut to what is left of it, and to 1 s; a
  /// TLS handshake with a peer that answered still gets `connect_timeout`).
  /// Why: the job's supervisor finds a silent node in its heartbeat window,
  /// and a path between two nodes that fails while both still answer it
  /// should cost no more. A cut shorter than the silence half resumes on
  /// the same connection; a longer one heals only if an attempt to connect
  /// (one SYN each) gets through before the window runs out. 0: the
  /// options' timeouts.
  void serve_job(int64_t job, std::chrono::milliseconds path_window = {});
  int64_t job() const;
  /// Frames whose destination is `a.id()` are delivered to `a` until it
  /// terminates. A frame to it whose payload exceeds `max_payload` (0: the
  /// plane's `limits.max_payload`) is refused before any of it is read and
  /// its connection closed: each sink's cap is the largest tensor its
  /// deployment sends it (a replica's from its stage's shapes,
  /// replica_footprint.hpp; a device's snapshot store, the node's memory
  /// budget). A frame to an actor that is gone is held to the largest cap
  /// of any sink. Called again for the same actor, it changes the cap (a
  /// replica re-configured with other shares).
  void add_sink(const caf::actor& a, uint64_t max_payload = 0);
  void remove_sink(caf::actor_id id);
  /// Queues `m` as one frame to actor `destination` of the data plane at
  /// `endpoint` ("host:port"). Returns false when the frame was dropped
  /// (queue still full after `queue_wait`, or stopping).
  bool send(const std::string& endpoint, caf::actor_id destination,
            serialization::tensor_message m);
  counters stats() const;
  /// Called (on an I/O thread; keep it short) when a link gives up on
  /// `endpoint`: it could not be reached again within `heal_timeout` (or
  /// the served job's `path_window`), and
  /// the frames pending for it were dropped. Not for a peer that refuses
  /// the connection: nothing listens there, its process is gone, and the
  /// supervisor's heartbeats find that.
  /// The node's device tells its job's supervisor, which handles it as the
  /// loss of that device (docs/fault_tolerance.md). Empty: nobody is told.
  using unreachable_handler =
    std::function<void(const std::string& endpoint, const std::string& why)>;
  void on_unreachable(unreachable_handler f);
  /// Breaks every connection at once, as a network fault would (the job's
  /// `reset` fault, tests). Outgoing links heal by themselves: they connect
  /// again and write their unacknowledged frames again.
  void reset_connections();
  /// Closes every connection and joins every thread (a blocked `send`
  /// returns false); idempotent.
  void stop();

private:
  explicit data_plane(options opts);

  std::shared_ptr<detail::data_plane_core> core_;
};

/// One line for a log: frames out and in, written again, duplicates and
/// drops ("N frames out, N in, N written again after a broken connection,
/// ...").
std::string to_string(const data_plane::counters& c);

/// "host:port" of the data plane of the node published at `node_endpoint`
/// that reports `data_port` (`ast_caps`); empty when the port is not one.
std::string data_endpoint(const std::string& node_endpoint, int64_t data_port);

} // namespace asteroid::actors
