// The data plane on standalone Asio (data_plane.hpp): the listener, the
// incoming connections (frames in, probe echoes answered), the outgoing
// connections (a bounded queue per destination, stage states on a second
// one), all served by one event loop that `options::io_threads` threads run.
#include "asteroid/actors/data_plane.hpp"

#include "asteroid/actors/protocol.hpp"

#include "data_plane/frame_reader.hpp"
#include "data_plane/link_stream.hpp"
#include "data_plane/peer_silence.hpp"
#include "tls_context.hpp"

#include <spdlog/spdlog.h>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <limits>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <stdexcept>
#include <thread>

namespace asteroid::actors {

using serialization::frame_header;
using serialization::tensor_kind;
using asio::ip::tcp;
using steady = std::chrono::steady_clock;

namespace detail {

// Not in an anonymous namespace: inbound and outbound hold these, and a
// class with internal-linkage members draws -Wsubobject-linkage when the
// file is compiled as part of a unity source.

/// Paces writes to `rate_Bps`, 64 KiB at a time, as a link of that rate
/// would deliver them: a slice goes to the socket when the link would have
/// finished carrying it, so a frame on an idle link arrives whole about
/// `size / rate` after it was sent and leaves no debt for the next one.
/// The lanes to one destination share it (they share the link it stands
/// for), each from its own strand.
struct pacer {
  static constexpr size_t slice = 64 << 10;
  /// How far behind schedule a busy link may fall and still catch up: a
  /// timer fires late, and without this credit each late wake-up would be
  /// lost (at 1000 Mbit/s a 64 KiB slice lasts 0.5 ms). A link idle for
  /// longer starts afresh, so a frame on it never arrives early.
  static constexpr auto catch_up = std::chrono::milliseconds(1);
  double rate_Bps = 0;
  std::mutex mu;
  steady::time_point next{};
  /// When the next `n` bytes may go.
  steady::time_point slot_for(size_t n) {
    std::lock_guard<std::mutex> guard{mu};
    auto now = steady::now();
    next = (now - next <= catch_up ? next : now)
           + std::chrono::duration_cast<steady::duration>(
             std::chrono::duration<double>(static_cast<double>(n) / rate_Bps));
    return next;
  }
};

/// Which connection to a destination a frame takes (data_plane::send): its
/// stage states apart from everything else.
enum class lane { pipeline, bulk };

/// One frame on its way out: kept until it is acknowledged (or dropped).
struct out_frame {
  frame_header h;
  std::array<char, serialization::frame_header_size> header;
  std::string key;
  std::string payload;
  /// Connections it was (begun to be) written on: more than one, a resend.
  int tries = 0;
  std::array<asio::const_buffer, 3> buffers() const {
    return {asio::buffer(header), asio::buffer(key), asio::buffer(payload)};
  }
  size_t size() const { return header.size() + key.size() + payload.size(); }
  /// Gives it its place in a link's stream.
  void number(uint64_t link, uint64_t sequence) {
    h.link = link;
    h.sequence = sequence;
    header = serialization::encode_frame_header(h);
  }
};

out_frame frame_of(serialization::tensor_message m, caf::actor_id destination) {
  auto h = serialization::frame_header_of(m, destination);
  return {h, serialization::encode_frame_header(h), std::move(m.key),
          std::move(m.payload)};
}

class inbound;
class outbound;

struct data_plane_core {
  explicit data_plane_core(data_plane::options o)
    : opts(std::move(o)), silence_ms(opts.silence_timeout.count()),
      heal_ms(opts.heal_timeout.count()) {}

  data_plane::options opts;
  // The served job's (serve_job's path_window), read on every strand.
  std::atomic<int64_t> silence_ms, heal_ms;
  std::chrono::milliseconds silence_timeout() const {
    return std::chrono::milliseconds(silence_ms.load());
  }
  std::chrono::milliseconds heal_timeout() const {
    return std::chrono::milliseconds(heal_ms.load());
  }
  // Before every socket and timer bound to it: destroyed after them.
  asio::io_context io;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work{
    std::in_place, io.get_executor()};
  std::optional<asio::ssl::context> tls;
  asio::any_io_executor accept_strand{asio::make_strand(io)};
  tcp::acceptor acceptor{accept_strand};
  asio::steady_timer accept_retry{accept_strand};
  bool accept_failing = false; ///< accept strand only
  uint16_t port = 0;
  std::atomic<bool> stopping{false};
  std::atomic<int64_t> job{0};

  std::vector<std::thread> threads;
  std::mutex threads_mu;
  std::condition_variable threads_done;
  int running = 0;

  /// What a receiver remembers of one sender's link: the highest sequence
  /// number delivered, so a frame written again after a broken connection
  /// is delivered once.
  struct link_record {
    uint64_t delivered = 0;
    uint64_t last_used = 0;
  };
  /// Links remembered at once; beyond, the least recently used is
  /// forgotten (a node's peers need one each; only a peer that passed the
  /// handshake and the job check makes one).
  static constexpr size_t max_links = 1024;

  /// What became of a frame that arrived.
  struct receipt {
    bool fresh = true;         ///< false: its link delivered it before
    uint64_t acknowledged = 0; ///< its link's highest delivered sequence number
  };

  /// An actor frames are delivered to, and the largest payload it expects.
  struct sink {
    caf::actor actor;
    uint64_t max_payload = 0;
  };

  mutable std::mutex mu; ///< guards sinks, outgoing, incoming, links, stats, unreachable
  data_plane::unreachable_handler unreachable;
  std::map<caf::actor_id, sink> sinks;
  /// By destination and lane (connection_to).
  std::map<std::pair<std::string, lane>, std::shared_ptr<outbound>> outgoing;
  /// One per destination, shared by its lanes (null: links not paced).
  std::map<std::string, std::shared_ptr<pacer>> pacers;
  std::list<std::weak_ptr<inbound>> incoming;
  std::map<uint64_t, link_record> links;
  uint64_t link_clock = 0;
  data_plane::counters stats;
  std::mutex rng_mu; ///< its own: outbound links are made under `mu`
  std::mt19937_64 rng{std::random_device{}()};

  void tell_unreachable(const std::string& endpoint, const std::string& why) {
    data_plane::unreachable_handler f;
    {
      std::lock_guard<std::mutex> guard{mu};
      f = unreachable;
    }
    if (f)
      f(endpoint, why);
  }
  template <class F>
  void count(F f) {
    std::lock_guard<std::mutex> guard{mu};
    f(stats);
  }
  asio::ssl::context* tls_context() { return tls ? &*tls : nullptr; }
  void listen();
  void accept();
  void admit(tcp::socket socket);
  /// Closes the oldest incoming connection that has not shown itself a
  /// peer yet; false when there is none.
  bool evict_one();
  /// The largest payload a frame with header `h` may carry: its sink's;
  /// for a destination without one (an actor gone after a recovery), the
  /// largest any sink expects; for a probe echo, the plane's limit.
  uint64_t payload_cap(const frame_header& h) const;
  /// Delivers a tensor frame to its sink unless its link delivered it
  /// before; an echo is left to the caller to answer (when fresh).
  receipt receive(const frame_header& h, std::string key, std::string payload);
  /// A random, nonzero id for a new outgoing link.
  uint64_t new_link_id();
  std::shared_ptr<outbound> connection_to(const std::string& endpoint, lane l);
  /// Every outgoing and live incoming connection; with `forget`, the plane
  /// lets go of them and of its sinks (stopping).
  std::pair<std::vector<std::shared_ptr<outbound>>, std::vector<std::shared_ptr<inbound>>>
  connections(bool forget);
};

/// A connection a peer opened: frames in, delivered to sinks; probe echoes
/// answered on the same connection.
class inbound : public frame_receiver, public std::enable_shared_from_this<inbound> {
public:
  inbound(data_plane_core& plane, tcp::socket socket)
    : plane_(plane), watchdog_(socket.get_executor()) {
    asio::error_code ec;
    auto from = socket.remote_endpoint(ec);
    peer_ = ec ? std::string("?") : from.address().to_string() + ":"
                                      + std::to_string(from.port());
    asio::ip::tcp::no_delay nodelay{true};
    socket.set_option(nodelay, ec);
    limit_silence(socket.native_handle(), plane.silence_timeout());
    link_ = std::make_shared<link_stream>(std::move(socket), plane.tls_context());
  }

  /// Whether it passed the TLS handshake (plain TCP: sent a frame of the
  /// served job). Read by the acceptor, whatever strand it is on.
  bool proven() const { return proven_; }

  void start() {
    last_bytes_ = steady::now();
    watch();
    if (!link_->tls())
      return frame_reader::start(link_, weak_from_this(), plane_.opts.limits);
    link_->async_handshake(true, [self = shared_from_this()](const asio::error_code& ec) {
      if (self->closed_)
        return;
      if (ec) {
        spdlog::warn("data plane: refused a connection from {}: TLS handshake "
                     "failed: {}",
                     self->peer_, ec.message());
        self->plane_.count([](auto& c) { ++c.refused_handshakes; });
        return self->close();
      }
      self->proven_ = true;
      self->last_bytes_ = steady::now();
      frame_reader::start(self->link_, self->weak_from_this(),
                          self->plane_.opts.limits);
    });
  }

  /// From any thread: start() on this connection's strand.
  void start_soon() {
    asio::post(watchdog_.get_executor(), [self = shared_from_this()] { self->start(); });
  }

  /// From any thread.
  void close_soon() {
    closing_ = true;
    asio::post(watchdog_.get_executor(), [self = shared_from_this()] { self->close(); });
  }

  /// Closed, or about to be: no longer a candidate to make room.
  bool closing() const { return closing_; }

  void on_bytes(const link_stream&) override { last_bytes_ = steady::now(); }

  bool on_header(const link_stream&, const frame_header& h) override {
    if (h.type != serialization::frame_type::tensor) {
      spdlog::warn("data plane: closing a connection from {} that sent an "
                   "acknowledgement (only senders receive those)",
                   peer_);
      plane_.count([](auto& c) { ++c.bad_connections; });
      return false;
    }
    if (const int64_t serving = plane_.job; h.job != serving) {
      // Not this node's job: nothing of it is read, let alone delivered.
      spdlog::warn("data plane: closing a connection from {} that sent {} of "
                   "job {} (this node serves {})",
                   peer_, serialization::to_string(h.kind), h.job,
                   serving ? "job " + std::to_string(serving) : std::string("no job"));
      plane_.count([](auto& c) { ++c.bad_connections; });
      return false;
    }
    if (const auto cap = plane_.payload_cap(h); h.payload_size > cap) {
      // More than its deployment sends the destination in one frame: refused
      // before a byte of it is read (a peer of the job that misbehaves, or
      // a runtime bug; the sender's link tries again and gives up).
      spdlog::warn("data plane: closing a connection from {} that sent {} of "
                   "{} bytes to actor {}, which expects at most {} bytes",
                   peer_, serialization::to_string(h.kind), h.payload_size,
                   h.destination, cap);
      plane_.count([](auto& c) { ++c.oversized_frames; });
      return false;
    }
    proven_ = true;
    return true;
  }

  void on_frame(const link_stream&, frame_header h, std::string key,
                std::string payload) override {
    auto echo_size = static_cast<int64_t>(payload.size());
    auto r = plane_.receive(h, std::move(key), std::move(payload));
    if (h.link != 0 && h.sequence != 0) {
      // Acknowledged once delivered (or known delivered): the sender may
      // forget it. Acknowledgements are cumulative, so one write can answer
      // every frame that arrived while the last was under way.
      ack_link_ = h.link;
      ack_upto_ = r.acknowledged;
      ack_due_ = true;
    }
    if (h.kind == tensor_kind::echo && h.step != serialization::echo_without_reply) {
      // A link probe: the reply goes back on this connection, so a peer can
      // never make this node connect anywhere. A stream's filler
      // (echo_without_reply) wants none. A duplicate is answered too: it is
      // an echo written again on a new connection after the old one broke,
      // whose first answer may have been lost with that one, and the prober
      // waits for an answer. The reply carries the echo's generation, the
      // prober's tag, so that it can tell a second answer from the next one.
      serialization::tensor_message reply;
      reply.kind = tensor_kind::echo_reply;
      reply.job = h.job;
      reply.generation = h.generation;
      reply.step = echo_size;
      if (replies_.size() < max_replies)
        replies_.push_back(frame_of(std::move(reply), static_cast<caf::actor_id>(h.step)));
      else
        plane_.count([](auto& c) { ++c.dropped_out; });
    }
    write_next();
  }

  void on_end(const link_stream&, const std::string& why, bool bad) override {
    if (bad && !closed_) {
      spdlog::warn("data plane: closing a connection from {} that sent a bad "
                   "frame: {}",
                   peer_, why);
      plane_.count([](auto& c) { ++c.bad_connections; });
    }
    close();
  }

private:
  /// Probe echoes waiting to be answered; more are dropped (a prober waits
  /// for each answer before it sends the next).
  static constexpr size_t max_replies = 4;

  /// Writes what goes back to the sender, one write at a time: probe
  /// answers, then the latest acknowledgement.
  void write_next() {
    if (writing_ || closed_)
      return;
    if (!replies_.empty()) {
      writing_ = true;
      asio::async_write(*link_, replies_.front().buffers(), transfer_whole{},
                        [self = shared_from_this()](const asio::error_code& ec, size_t) {
                          self->writing_ = false;
                          if (ec)
                            return self->close();
                          self->plane_.count([](auto& c) { ++c.frames_out; });
                          self->replies_.pop_front();
                          self->write_next();
                        });
      return;
    }
    if (!ack_due_)
      return;
    ack_due_ = false;
    ack_bytes_ = serialization::encode_frame_header(
      serialization::acknowledgement_header(ack_link_, ack_upto_));
    writing_ = true;
    asio::async_write(*link_, asio::buffer(ack_bytes_),
                      [self = shared_from_this()](const asio::error_code& ec, size_t) {
                        self->writing_ = false;
                        if (ec)
                          return self->close();
                        self->write_next();
                      });
  }

  /// Closes the connection when it has been silent too long: before it
  /// proved itself, `handshake_timeout`; after, `idle_timeout`.
  void watch() {
    auto limit = proven_ ? plane_.opts.idle_timeout : plane_.opts.handshake_timeout;
    watchdog_.expires_at(last_bytes_ + limit);
    watchdog_.async_wait([self = shared_from_this()](const asio::error_code& ec) {
      if (ec || self->closed_)
        return;
      auto limit = self->proven_ ? self->plane_.opts.idle_timeout
                                 : self->plane_.opts.handshake_timeout;
      if (steady::now() - self->last_bytes_ < limit)
        return self->watch();
      spdlog::info("data plane: closing a connection from {}: silent for {} ms",
                   self->peer_, limit.count());
      self->plane_.count([](auto& c) { ++c.silent_connections; });
      self->close();
    });
  }

  void close() {
    if (closed_)
      return;
    closed_ = true;
    closing_ = true;
    watchdog_.cancel();
    link_->close();
  }

  data_plane_core& plane_;
  asio::steady_timer watchdog_;
  std::shared_ptr<link_stream> link_;
  std::string peer_;
  std::atomic<bool> proven_{false};
  std::atomic<bool> closing_{false};
  bool closed_ = false;
  steady::time_point last_bytes_;
  std::deque<out_frame> replies_;
  bool writing_ = false;
  bool ack_due_ = false;
  uint64_t ack_link_ = 0, ack_upto_ = 0;
  std::array<char, serialization::frame_header_size> ack_bytes_{};
};

/// The link to one destination's data plane: a bounded queue that senders
/// fill from their own threads, written in order on the strand. Every frame
/// gets the next sequence number of this link and is kept until the
/// receiver acknowledges it. The connection is made for the first frame;
/// when it breaks, a new one is made (backing off, for up to
/// `heal_timeout`) and every unacknowledged frame is written again, in
/// order; the receiver drops those it had delivered. So a connection that
/// breaks costs a stall, not a frame. A peer that refuses the connection
/// (nothing listens: its process is gone), or that stays out of reach past
/// `heal_timeout`, loses what was pending for it: that is the loss of a
/// device, which the supervisor's heartbeats handle. This side closes the
/// connection after `idle_timeout / 2` without frames, before the peer's
/// own idle timeout could close it under a write.
class outbound : public frame_receiver, public std::enable_shared_from_this<outbound> {
public:
  outbound(data_plane_core& plane, std::string endpoint, std::shared_ptr<pacer> pace)
    : plane_(plane),
      endpoint_(std::move(endpoint)),
      strand_(asio::make_strand(plane.io)),
      resolver_(strand_),
      connect_timer_(strand_),
      pace_timer_(strand_),
      idle_timer_(strand_),
      retry_timer_(strand_),
      silence_timer_(strand_),
      link_id_(plane.new_link_id()),
      pace_(std::move(pace)) {}

  /// From a sender's thread: waits up to `queue_wait` for room (frames
  /// queued and frames not yet acknowledged count alike).
  bool enqueue(out_frame f) {
    std::unique_lock<std::mutex> lock{mu_};
    auto room = [&] { return queue_.size() + unacked_count_ < plane_.opts.queue_frames; };
    has_space_.wait_for(lock, plane_.opts.queue_wait, [&] { return stopped_ || room(); });
    if (stopped_ || !room()) {
      lock.unlock();
      plane_.count([](auto& c) { ++c.dropped_out; });
      return false;
    }
    queue_.push_back(std::make_shared<out_frame>(std::move(f)));
    if (!pumping_) {
      pumping_ = true;
      asio::post(strand_, [self = shared_from_this()] { self->pump(); });
    }
    return true;
  }

  /// From any thread, when the node's job changed to `job`: frames of
  /// another job are dropped, and the connection is closed unless a frame
  /// is under way (the next frame connects again).
  void forget_other_jobs_soon(int64_t job) {
    asio::post(strand_, [self = shared_from_this(), job] {
      auto other = [job](const std::shared_ptr<out_frame>& f) { return f->h.job != job; };
      auto& unacked = self->unacked_;
      size_t dropped = unacked.size();
      unacked.erase(std::remove_if(unacked.begin(), unacked.end(), other), unacked.end());
      dropped -= unacked.size();
      {
        std::lock_guard<std::mutex> lock{self->mu_};
        dropped += static_cast<size_t>(
          std::count_if(self->queue_.begin(), self->queue_.end(), other));
        self->queue_.erase(std::remove_if(self->queue_.begin(), self->queue_.end(), other),
                           self->queue_.end());
        self->unacked_count_ = unacked.size();
      }
      self->has_space_.notify_all();
      if (dropped)
        self->plane_.count([&](auto& c) { c.dropped_out += static_cast<int64_t>(dropped); });
      if (self->writing_ || !self->unacked_.empty() || !self->link_)
        return;
      self->connected_ = false;
      self->link_->close();
    });
  }

  /// From any thread: breaks the connection as a network fault would; the
  /// link heals by itself.
  void reset_soon() {
    asio::post(strand_, [self = shared_from_this()] {
      if (self->link_ && self->connected_)
        self->broke(self->link_, "reset (injected fault)");
    });
  }

  /// From any thread: drops what is pending, wakes blocked senders, closes.
  void stop() {
    {
      std::lock_guard<std::mutex> lock{mu_};
      stopped_ = true;
      queue_.clear();
    }
    has_space_.notify_all();
    asio::post(strand_, [self = shared_from_this()] {
      self->unacked_.clear();
      self->resolver_.cancel();
      self->connect_timer_.cancel();
      self->pace_timer_.cancel();
      self->idle_timer_.cancel();
      self->retry_timer_.cancel();
      self->silence_timer_.cancel();
      if (self->link_)
        self->link_->close();
    });
  }

  // Frames the peer writes back: acknowledgements of our frames, and
  // answers to our probe echoes.
  void on_bytes(const link_stream&) override {}
  bool on_header(const link_stream&, const frame_header& h) override {
    if (h.type == serialization::frame_type::acknowledgement
        || h.kind == tensor_kind::echo_reply)
      return true;
    // Closed; on_end follows and writes what is pending again elsewhere.
    spdlog::warn("data plane: {} sent {} on our connection to it; closing it",
                 endpoint_, serialization::to_string(h.kind));
    plane_.count([](auto& c) { ++c.bad_connections; });
    return false;
  }
  void on_frame(const link_stream& from, frame_header h, std::string key,
                std::string payload) override {
    if (h.type == serialization::frame_type::acknowledgement)
      return acknowledged(h, &from == link_.get());
    plane_.receive(h, std::move(key), std::move(payload));
  }
  void on_end(const link_stream& from, const std::string& why, bool bad) override {
    if (&from != link_.get())
      return;
    if (bad)
      plane_.count([](auto& c) { ++c.bad_connections; });
    if (!writing_ && unacked_.empty()) {
      // Closed while idle (the peer's idle timeout, a new job): the next
      // frame connects again.
      spdlog::debug("data plane: connection to {} closed: {}", endpoint_, why);
      connected_ = false;
      link_->close();
      return;
    }
    broke(link_, why);
  }

private:
  /// On the strand: the next frame to write, if none is under way.
  void pump() {
    if (writing_ || connecting_ || retry_pending_)
      return;
    auto next = connected_ ? first_unwritten() : nullptr;
    if (!next) {
      std::unique_lock<std::mutex> lock{mu_};
      if (stopped_) {
        pumping_ = false;
        return;
      }
      if (queue_.empty()) {
        pumping_ = false;
        lock.unlock();
        if (!connected_ && !unacked_.empty())
          return connect(); // frames to write again on a new connection
        if (connected_ && unacked_.empty())
          arm_idle_close();
        return;
      }
      if (connected_) {
        next = std::move(queue_.front());
        queue_.pop_front();
        next->number(link_id_, ++last_sequence_);
        unacked_.push_back(next);
        ++unacked_count_;
      }
    }
    if (!connected_)
      return connect();
    write(next);
  }

  /// The oldest unacknowledged frame not yet written on this connection.
  std::shared_ptr<out_frame> first_unwritten() const {
    for (auto& f : unacked_)
      if (f->h.sequence >= next_to_write_)
        return f;
    return nullptr;
  }

  void acknowledged(const frame_header& ack, bool on_this_connection) {
    if (ack.link != link_id_)
      return;
    if (on_this_connection && !progress_) {
      // The peer takes frames on this connection: the link is up again.
      progress_ = true;
      down_since_.reset();
      backoff_ = {};
      reported_ = false;
    }
    size_t done = 0;
    while (!unacked_.empty() && unacked_.front()->h.sequence <= ack.sequence) {
      unacked_.pop_front();
      ++done;
    }
    if (done == 0)
      return;
    {
      std::lock_guard<std::mutex> lock{mu_};
      unacked_count_ = unacked_.size();
    }
    has_space_.notify_all();
    if (unacked_.empty() && !writing_)
      pump(); // nothing left to wait for: the idle timer may start
  }

  /// The connection under way ended before its frames were acknowledged:
  /// connect again and write them again.
  void broke(const std::shared_ptr<link_stream>& link, const std::string& why) {
    if (link != link_ || !connected_)
      return; // an old connection's news, or handled already
    connected_ = false;
    link->close();
    pace_timer_.cancel(); // a paced write waiting for its slot fails now
    next_to_write_ = 0;
    if (stopping())
      return;
    if (unacked_.empty()) {
      spdlog::debug("data plane: connection to {} broke: {} (nothing pending)", endpoint_, why);
      return pump();
    }
    if (!reported_)
      spdlog::warn("data plane: connection to {} broke: {} ({} frames to write again)",
                   endpoint_, why, unacked_.size());
    reported_ = true;
    // The heal timeout counts from here, not from the first failed attempt
    // to connect again (which a silent peer makes wait connect_timeout).
    if (!down_since_)
      down_since_ = steady::now();
    if (!progress_)
      // Nothing was acknowledged on it: the peer may be refusing these
      // frames (another job's, after it moved on), so this counts as a
      // failed attempt, backed off and bounded by the heal timeout.
      return retry_later(why);
    pump();
  }

  void connect() {
    std::string host;
    uint16_t port = 0;
    try {
      std::tie(host, port) = parse_endpoint(endpoint_);
    } catch (const std::exception& e) {
      return give_up(e.what());
    }
    if (link_)
      link_->close();
    connecting_ = true;
    link_ = std::make_shared<link_stream>(tcp::socket(strand_), plane_.tls_context());
    auto link = link_;
    // A link already down waits for TCP's answer no longer than its heal
    // timeout has left, so a silent peer is given up when that runs out, not
    // an attempt later; and no longer than 1 s, TCP's first SYN back-off, so
    // a path that heals meanwhile is tried again with a fresh SYN at once.
    auto wait = plane_.opts.connect_timeout;
    if (down_since_)
      wait = std::max(std::chrono::milliseconds(50),
                      std::min({heal_time_left(), wait, std::chrono::milliseconds(1000)}));
    arm_connect_timer(link, wait);
    auto self = shared_from_this();
    asio::error_code not_numeric;
    auto address = asio::ip::make_address_v4(host, not_numeric);
    if (!not_numeric) {
      // The usual case: no resolver (which would run a thread of its own).
      link->socket().async_connect(tcp::endpoint{address, port},
                                   [self, link](const asio::error_code& ec) {
                                     self->tcp_connected(link, ec);
                                   });
      return;
    }
    resolver_.async_resolve(tcp::v4(), host, std::to_string(port),
                            [self, link](const asio::error_code& ec,
                                         tcp::resolver::results_type found) {
                              if (ec)
                                return self->connect_failed(link, ec);
                              // A resolve under way cannot be cancelled: it
                              // may finish after the connect timer fired.
                              if (link != self->link_ || self->timed_out_)
                                return self->connect_failed(
                                  link, asio::error::operation_aborted);
                              asio::async_connect(link->socket(), found,
                                                  [self, link](const asio::error_code& ec,
                                                               const tcp::endpoint&) {
                                                    self->tcp_connected(link, ec);
                                                  });
                            });
  }

  void tcp_connected(const std::shared_ptr<link_stream>& link, const asio::error_code& ec) {
    if (ec)
      return connect_failed(link, ec);
    asio::error_code ignored;
    link->socket().set_option(tcp::no_delay{true}, ignored);
    limit_silence(link->socket().native_handle(), plane_.silence_timeout());
    if (!link->tls())
      return connected(link);
    // The peer answered: the path works. Its handshake gets the whole
    // connect timeout, so a busy peer on a loaded host is not given up for
    // being slow to compute its half.
    arm_connect_timer(link, plane_.opts.connect_timeout);
    link->async_handshake(false, [self = shared_from_this(), link](const asio::error_code& ec) {
      if (ec)
        return self->connect_failed(link, ec, "TLS handshake failed: ");
      self->connected(link);
    });
  }

  void connect_failed(const std::shared_ptr<link_stream>& link,
                      const asio::error_code& ec, const char* what = "") {
    if (link != link_)
      return;
    connecting_ = false;
    connect_timer_.cancel();
    link->close();
    if (stopping())
      return;
    auto why = timed_out_ ? "no connection within "
                              + std::to_string(attempt_timeout_.count()) + " ms"
                          : what + ec.message();
    // Nothing listens there: the peer's process is gone, and with it what
    // it would have done with these frames.
    if (ec == asio::error::connection_refused)
      return give_up(why);
    retry_later(why);
  }

  /// Closes `link` unless it is connected within `wait`.
  void arm_connect_timer(const std::shared_ptr<link_stream>& link,
                         std::chrono::milliseconds wait) {
    attempt_timeout_ = wait;
    timed_out_ = false;
    connect_timer_.expires_after(wait);
    connect_timer_.async_wait([self = shared_from_this(), link](const asio::error_code& ec) {
      if (ec || link != self->link_ || self->connected_)
        return;
      self->timed_out_ = true;
      self->resolver_.cancel();
      link->close();
    });
  }

  /// What the heal timeout leaves since the link went down (all of it
  /// while it is up).
  std::chrono::milliseconds heal_time_left() const {
    const auto heal = plane_.heal_timeout();
    if (!down_since_)
      return heal;
    return heal - std::chrono::duration_cast<std::chrono::milliseconds>(steady::now()
                                                                        - *down_since_);
  }

  /// Another attempt after a back-off, unless the link has been down for
  /// `heal_timeout` already.
  void retry_later(const std::string& why) {
    auto now = steady::now();
    if (!down_since_)
      down_since_ = now;
    if (heal_time_left().count() <= 0)
      return give_up(why, true);
    if (!reported_)
      spdlog::warn("data plane: cannot reach {}: {} (trying again for up to {} ms)",
                   endpoint_, why, plane_.heal_timeout().count());
    reported_ = true;
    backoff_ = std::clamp(backoff_ * 2, std::chrono::milliseconds(50),
                          std::chrono::milliseconds(1000));
    retry_pending_ = true;
    retry_timer_.expires_after(std::min(backoff_, heal_time_left()));
    retry_timer_.async_wait([self = shared_from_this()](const asio::error_code& ec) {
      self->retry_pending_ = false;
      if (!ec && !self->stopping())
        self->pump();
    });
  }

  void connected(const std::shared_ptr<link_stream>& link) {
    if (link != link_)
      return;
    connect_timer_.cancel();
    connecting_ = false;
    connected_ = true;
    progress_ = false; // the link counts as up once a frame is acknowledged
    if (reported_ && !unacked_.empty())
      spdlog::info("data plane: connection to {} made again; writing {} frames again",
                   endpoint_, unacked_.size());
    next_to_write_ = 0;
    silence_.reset();
    watch_silence(link);
    frame_reader::start(link, weak_from_this(), plane_.opts.limits);
    pump();
  }

  /// While `link` is this link's connection, every quarter of the silence
  /// timeout: breaks it when frames wait for a peer whose TCP has
  /// acknowledged none of them for the whole timeout, which TCP_USER_TIMEOUT
  /// finds late on a path that fails in one direction (peer_silence.hpp);
  /// it then connects again, as after any break.
  void watch_silence(const std::shared_ptr<link_stream>& link) {
    const auto limit = plane_.silence_timeout();
    if (limit.count() <= 0)
      return;
    silence_timer_.expires_after(std::max(limit / 4, std::chrono::milliseconds(10)));
    silence_timer_.async_wait([self = shared_from_this(), link,
                               limit](const asio::error_code& ec) {
      if (ec || link != self->link_ || !self->connected_ || self->stopping())
        return;
      if (self->unacked_.empty())
        self->silence_.reset();
      else if (self->silence_.silent_for(link->socket().native_handle(), limit))
        return self->broke(link, "the peer's TCP acknowledged nothing for "
                                   + std::to_string(limit.count()) + " ms");
      self->watch_silence(link);
    });
  }

  /// The peer cannot be reached: what is pending for it is dropped, said
  /// once per streak; the next frame tries again. `out_of_reach`: it stayed
  /// unreachable for the heal timeout, which `on_unreachable` hears of (a
  /// peer that refuses the connection is a process gone, which the
  /// supervisor's heartbeats find; blamed on the path, it would make the
  /// reporter look like the one whose network failed at the next loss).
  void give_up(const std::string& why, bool out_of_reach = false) {
    size_t dropped = unacked_.size();
    unacked_.clear();
    next_to_write_ = 0;
    {
      std::lock_guard<std::mutex> lock{mu_};
      dropped += queue_.size();
      queue_.clear();
      unacked_count_ = 0;
    }
    has_space_.notify_all();
    plane_.count([&](auto& c) { c.dropped_out += static_cast<int64_t>(dropped); });
    if (!gave_up_) {
      spdlog::warn("data plane: cannot reach {}: {} ({} frames dropped; frames to "
                   "it are dropped until it answers)",
                   endpoint_, why, dropped);
      if (dropped > 0 && out_of_reach)
        plane_.tell_unreachable(endpoint_, why);
    }
    gave_up_ = true;
    reported_ = true;
    down_since_.reset();
    backoff_ = {};
    pump();
  }

  void write(const std::shared_ptr<out_frame>& f) {
    idle_timer_.cancel();
    writing_ = true;
    ++f->tries;
    gave_up_ = false;
    auto link = link_;
    if (!pace_) {
      asio::async_write(*link, f->buffers(), transfer_whole{},
                        [self = shared_from_this(), link, f](const asio::error_code& ec,
                                                             size_t) {
                          self->written(link, f, ec);
                        });
      return;
    }
    // Paced: one contiguous copy cut into slices (at link rates of a few
    // hundred Mbit/s the copy costs nothing that shows).
    paced_ = std::string(f->header.data(), f->header.size());
    paced_ += f->key;
    paced_ += f->payload;
    paced_offset_ = 0;
    write_slice(link, f);
  }

  void write_slice(const std::shared_ptr<link_stream>& link,
                   const std::shared_ptr<out_frame>& f) {
    auto n = std::min(pacer::slice, paced_.size() - paced_offset_);
    pace_timer_.expires_at(pace_->slot_for(n));
    pace_timer_.async_wait([self = shared_from_this(), link, f, n](const asio::error_code& ec) {
      if (ec)
        return self->written(link, f, ec);
      asio::async_write(*link, asio::buffer(self->paced_.data() + self->paced_offset_, n),
                        transfer_whole{},
                        [self, link, f, n](const asio::error_code& ec, size_t) {
                          if (ec)
                            return self->written(link, f, ec);
                          self->paced_offset_ += n;
                          if (self->paced_offset_ < self->paced_.size())
                            return self->write_slice(link, f);
                          self->written(link, f, ec);
                        });
    });
  }

  void written(const std::shared_ptr<link_stream>& link,
               const std::shared_ptr<out_frame>& f, const asio::error_code& ec) {
    writing_ = false;
    paced_.clear();
    if (ec) {
      if (!stopping())
        broke(link, ec.message());
      return pump();
    }
    if (link == link_)
      next_to_write_ = f->h.sequence + 1;
    plane_.count([&](auto& c) {
      ++c.frames_out;
      c.bytes_out += static_cast<int64_t>(f->payload.size());
      if (f->tries > 1)
        ++c.resent_frames;
    });
    pump();
  }

  void arm_idle_close() {
    auto limit = plane_.opts.idle_timeout / 2;
    idle_timer_.expires_after(limit);
    idle_timer_.async_wait([self = shared_from_this(), link = link_](const asio::error_code& ec) {
      if (ec || link != self->link_ || self->writing_ || !self->unacked_.empty())
        return;
      spdlog::debug("data plane: closing the idle connection to {}", self->endpoint_);
      self->connected_ = false;
      link->close();
    });
  }

  bool stopping() {
    std::lock_guard<std::mutex> lock{mu_};
    return stopped_;
  }

  data_plane_core& plane_;
  const std::string endpoint_;
  asio::any_io_executor strand_;
  // Shared with senders.
  std::mutex mu_;
  std::condition_variable has_space_;
  std::deque<std::shared_ptr<out_frame>> queue_;
  size_t unacked_count_ = 0; ///< unacked_.size(), for senders
  bool stopped_ = false;
  bool pumping_ = false; ///< a pump is scheduled, or the strand will pump again
  // The strand's own.
  tcp::resolver resolver_;
  asio::steady_timer connect_timer_, pace_timer_, idle_timer_, retry_timer_, silence_timer_;
  peer_silence silence_;
  const uint64_t link_id_;
  uint64_t last_sequence_ = 0;
  /// Written (or being written) and not yet acknowledged, by sequence.
  std::deque<std::shared_ptr<out_frame>> unacked_;
  /// Frames below this sequence number were written on this connection.
  uint64_t next_to_write_ = 0;
  std::shared_ptr<link_stream> link_;
  bool connected_ = false, connecting_ = false, writing_ = false;
  bool progress_ = false; ///< a frame was acknowledged on this connection
  bool retry_pending_ = false;
  bool timed_out_ = false;
  std::chrono::milliseconds attempt_timeout_{};
  bool reported_ = false, gave_up_ = false;
  std::optional<steady::time_point> down_since_;
  std::chrono::milliseconds backoff_{};
  const std::shared_ptr<pacer> pace_;
  std::string paced_;
  size_t paced_offset_ = 0;
};

void data_plane_core::listen() {
  auto where = opts.host + ":" + std::to_string(opts.port);
  asio::error_code ec;
  tcp::resolver resolver{io};
  auto found = resolver.resolve(tcp::v4(), opts.host, std::to_string(opts.port),
                                tcp::resolver::passive, ec);
  if (ec || found.empty())
    throw std::runtime_error("data plane: cannot listen on " + where
                             + ": cannot resolve '" + opts.host + "': "
                             + (ec ? ec.message() : "no address"));
  auto at = found.begin()->endpoint();
  acceptor.open(at.protocol(), ec);
  if (!ec)
    acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec)
    acceptor.bind(at, ec);
  if (!ec)
    acceptor.listen(64, ec);
  if (!ec)
    port = acceptor.local_endpoint(ec).port();
  if (!ec)
    return;
  throw std::runtime_error("data plane: cannot listen on " + where + ": " + ec.message());
}

void data_plane_core::accept() {
  // Each connection's own strand: its handlers never run at once.
  acceptor.async_accept(
    asio::any_io_executor(asio::make_strand(io)),
    [this](const asio::error_code& ec, tcp::socket socket) {
      if (stopping || ec == asio::error::operation_aborted)
        return;
      if (!ec) {
        if (accept_failing)
          spdlog::info("data plane: accepting connections again");
        accept_failing = false;
        admit(std::move(socket));
        return accept();
      }
      // Out of descriptors (or memory): make room, back off, try again. The
      // pending connection waits in the kernel's backlog meanwhile.
      count([](auto& c) { ++c.accept_failures; });
      if (!accept_failing)
        spdlog::warn("data plane: cannot accept a connection: {} (trying again "
                     "every 100 ms)",
                     ec.message());
      accept_failing = true;
      evict_one();
      accept_retry.expires_after(std::chrono::milliseconds(100));
      accept_retry.async_wait([this](const asio::error_code& ec) {
        if (!ec && !stopping)
          accept();
      });
    });
}

bool data_plane_core::evict_one() {
  std::shared_ptr<inbound> victim;
  {
    std::lock_guard<std::mutex> guard{mu};
    for (auto& w : incoming)
      if (auto in = w.lock(); in && !in->proven() && !in->closing()) {
        victim = std::move(in);
        break;
      }
    if (victim)
      ++stats.evicted_connections;
  }
  if (victim)
    victim->close_soon();
  return victim != nullptr;
}

void data_plane_core::admit(tcp::socket socket) {
  size_t held = 0;
  {
    std::lock_guard<std::mutex> guard{mu};
    incoming.remove_if([](auto& w) { return w.expired(); });
    held = incoming.size();
  }
  if (held >= opts.max_incoming && !evict_one()) {
    // Every connection held is a peer's: the newcomer is turned away.
    count([](auto& c) { ++c.evicted_connections; });
    spdlog::warn("data plane: refused a connection: {} connections held already",
                 held);
    asio::error_code ignored;
    socket.close(ignored);
    return;
  }
  auto in = std::make_shared<inbound>(*this, std::move(socket));
  {
    std::lock_guard<std::mutex> guard{mu};
    if (stopping)
      return; // stop() has taken the list already; the socket closes with `in`
    incoming.push_back(in);
  }
  in->start_soon();
}

data_plane_core::receipt data_plane_core::receive(const frame_header& h, std::string key,
                                                  std::string payload) {
  receipt r;
  // Held while the frame is handed to its sink: two connections of one
  // link (the old one still draining, the new one resending) deliver in
  // sequence order, each frame once.
  std::lock_guard<std::mutex> guard{mu};
  if (h.link != 0 && h.sequence != 0) {
    auto it = links.find(h.link);
    if (it == links.end()) {
      if (links.size() >= max_links)
        links.erase(std::min_element(links.begin(), links.end(), [](auto& a, auto& b) {
          return a.second.last_used < b.second.last_used;
        }));
      it = links.emplace(h.link, link_record{}).first;
    }
    it->second.last_used = ++link_clock;
    if (h.sequence <= it->second.delivered) {
      ++stats.duplicate_frames;
      r.fresh = false;
      r.acknowledged = it->second.delivered;
      return r;
    }
    // A gap (sequence numbers skipped) is frames the sender dropped.
    it->second.delivered = r.acknowledged = h.sequence;
  }
  if (h.kind == tensor_kind::echo)
    return r; // answered by the connection it came on
  ++stats.frames_in;
  stats.bytes_in += static_cast<int64_t>(payload.size());
  auto sink = sinks.find(h.destination);
  if (sink == sinks.end()) {
    ++stats.dropped_in;
    // Rare, and the one trace of a probe that gave up before its answer
    // came (a frame for a replaced replica is routine and not logged).
    if (h.kind == tensor_kind::echo_reply)
      spdlog::info("data plane: a probe's answer (tag {}) came for actor {}, which no "
                   "longer waits for it",
                   h.generation, h.destination);
    return r;
  }
  // The same message a sender in this process would have sent: receivers
  // have one handler for tensors, whichever way they came.
  caf::anon_send(sink->second.actor, tensor_atom::value,
                 serialization::message_of(h, std::move(key), std::move(payload)));
  return r;
}

uint64_t data_plane_core::payload_cap(const frame_header& h) const {
  if (h.kind == tensor_kind::echo)
    return opts.limits.max_payload;
  std::lock_guard<std::mutex> guard{mu};
  if (auto it = sinks.find(h.destination); it != sinks.end())
    return it->second.max_payload;
  uint64_t largest = 0;
  for (const auto& [id, s] : sinks)
    largest = std::max(largest, s.max_payload);
  return sinks.empty() ? opts.limits.max_payload : largest;
}

uint64_t data_plane_core::new_link_id() {
  std::lock_guard<std::mutex> guard{rng_mu};
  uint64_t id = 0;
  while (id == 0)
    id = rng();
  return id;
}

std::pair<std::vector<std::shared_ptr<outbound>>, std::vector<std::shared_ptr<inbound>>>
data_plane_core::connections(bool forget) {
  std::vector<std::shared_ptr<outbound>> out;
  std::vector<std::shared_ptr<inbound>> in;
  std::lock_guard<std::mutex> guard{mu};
  for (auto& [_, o] : outgoing)
    out.push_back(o);
  for (auto& w : incoming)
    if (auto i = w.lock())
      in.push_back(std::move(i));
  if (forget) {
    outgoing.clear();
    incoming.clear();
    sinks.clear();
  }
  return {std::move(out), std::move(in)};
}

std::shared_ptr<outbound> data_plane_core::connection_to(const std::string& endpoint,
                                                          lane l) {
  std::lock_guard<std::mutex> guard{mu};
  if (stopping)
    return nullptr; // stop() has taken the map already
  auto& slot = outgoing[{endpoint, l}];
  if (!slot) {
    std::shared_ptr<pacer> pace;
    if (opts.rate_Bps > 0) {
      auto& shared = pacers[endpoint];
      if (!shared) {
        shared = std::make_shared<pacer>();
        shared->rate_Bps = opts.rate_Bps;
      }
      pace = shared;
    }
    slot = std::make_shared<outbound>(*this, endpoint, std::move(pace));
  }
  return slot;
}

} // namespace detail

std::shared_ptr<data_plane> data_plane::start(options opts) {
  std::shared_ptr<data_plane> dp{new data_plane(std::move(opts))};
  auto* core = dp->core_.get();
  core->accept();
  int n = std::max(1, core->opts.io_threads);
  core->running = n;
  for (int i = 0; i < n; ++i)
    core->threads.emplace_back([core] {
      // A handler that throws (out of memory for a payload) ends that
      // connection's work, not the node.
      for (;;) {
        try {
          core->io.run();
          break;
        } catch (const std::exception& e) {
          spdlog::error("data plane: {}", e.what());
        }
      }
      std::lock_guard<std::mutex> lock{core->threads_mu};
      --core->running;
      core->threads_done.notify_all();
    });
  return dp;
}

data_plane::data_plane(options opts)
  : core_(std::make_shared<detail::data_plane_core>(std::move(opts))) {
  if (!core_->opts.tls.empty()) {
    core_->tls.emplace(asio::ssl::context::tls);
    detail::configure_tls(core_->tls->native_handle(), core_->opts.tls);
  }
  core_->listen();
}

data_plane::~data_plane() { stop(); }

void data_plane::stop() {
  auto& c = *core_;
  if (c.stopping.exchange(true))
    return;
  auto [out, in] = c.connections(true);
  for (auto& o : out)
    o->stop();
  for (auto& i : in)
    i->close_soon();
  asio::post(c.accept_strand, [&c] {
    asio::error_code ignored;
    c.acceptor.close(ignored);
    c.accept_retry.cancel();
  });
  c.work.reset();
  {
    // Every handler ends once its socket or timer is closed; the bound is
    // for one that does not.
    std::unique_lock<std::mutex> lock{c.threads_mu};
    c.threads_done.wait_for(lock, std::chrono::seconds(3), [&] { return c.running == 0; });
  }
  c.io.stop();
  for (auto& t : c.threads)
    if (t.joinable())
      t.join();
}

uint16_t data_plane::port() const { return core_->port; }

void data_plane::serve_job(int64_t job, std::chrono::milliseconds path_window) {
  auto& c = *core_;
  // Set before the job's first connection, which takes its silence timeout.
  const bool own_window = job != 0 && path_window.count() > 0;
  const auto silence = own_window ? std::max(path_window / 2, std::chrono::milliseconds(1))
                                   : c.opts.silence_timeout;
  c.silence_ms = silence.count();
  c.heal_ms = own_window ? (path_window - silence).count() : c.opts.heal_timeout.count();
  if (c.job.exchange(job) == job)
    return;
  // A new job (or none): the last job's connections are of no more use, so
  // they go now rather than at their idle timeouts; the new job's peers
  // connect afresh.
  auto [out, in] = c.connections(false);
  for (auto& o : out)
    o->forget_other_jobs_soon(job);
  for (auto& i : in)
    i->close_soon();
  std::lock_guard<std::mutex> guard{c.mu};
  c.links.clear();
}

void data_plane::reset_connections() {
  auto [out, in] = core_->connections(false);
  for (auto& o : out)
    o->reset_soon();
  for (auto& i : in)
    i->close_soon();
}

int64_t data_plane::job() const { return core_->job; }

void data_plane::on_unreachable(unreachable_handler f) {
  std::lock_guard<std::mutex> guard{core_->mu};
  core_->unreachable = std::move(f);
}

void data_plane::add_sink(const caf::actor& a, uint64_t max_payload) {
  if (!a)
    return;
  const auto limit = core_->opts.limits.max_payload;
  {
    std::lock_guard<std::mutex> guard{core_->mu};
    auto [it, fresh] = core_->sinks.insert_or_assign(
      a.id(), detail::data_plane_core::sink{a, max_payload == 0 ? limit
                                                                : std::min(max_payload, limit)});
    if (!fresh)
      return; // a new cap for a sink that is already watched
  }
  std::weak_ptr<data_plane> weak = shared_from_this();
  a->attach_functor([weak, id = a.id()] {
    if (auto p = weak.lock())
      p->remove_sink(id);
  });
}

void data_plane::remove_sink(caf::actor_id id) {
  std::lock_guard<std::mutex> guard{core_->mu};
  core_->sinks.erase(id);
}

data_plane::counters data_plane::stats() const {
  std::lock_guard<std::mutex> guard{core_->mu};
  return core_->stats;
}

bool data_plane::send(const std::string& endpoint, caf::actor_id destination,
                      serialization::tensor_message m) {
  // A stage state (a backup snapshot before every step, tens of MB for a
  // large stage) takes a connection of its own: on the one the pipeline's
  // activations and gradients take, the step's first activation waited
  // behind the whole state; beside it, the two share the link.
  const auto l = m.kind == tensor_kind::snapshot ? detail::lane::bulk : detail::lane::pipeline;
  auto o = core_->connection_to(endpoint, l);
  if (!o)
    return false;
  return o->enqueue(detail::frame_of(std::move(m), destination));
}

std::string to_string(const data_plane::counters& c) {
  return std::to_string(c.frames_out) + " frames out, " + std::to_string(c.frames_in)
         + " in, " + std::to_string(c.resent_frames)
         + " written again after a broken connection, "
         + std::to_string(c.duplicate_frames) + " duplicates dropped, "
         + std::to_string(c.dropped_out) + " dropped out, "
         + std::to_string(c.dropped_in) + " dropped in, "
         + std::to_string(c.bad_connections) + " bad connections, "
         + std::to_string(c.oversized_frames) + " oversized frames refused, "
         + std::to_string(c.refused_handshakes) + " refused handshakes";
}

std::string data_endpoint(const std::string& node_endpoint, int64_t data_port) {
  if (data_port <= 0 || data_port > 65535)
    return {};
  return parse_endpoint(node_endpoint).first + ":" + std::to_string(data_port);
}

} // namespace asteroid::actors
