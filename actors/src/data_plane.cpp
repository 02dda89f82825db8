#include "asteroid/actors/data_plane.hpp"

#include "asteroid/actors/protocol.hpp"

#include "tls_stream.hpp"

#include <spdlog/spdlog.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <stdexcept>

namespace asteroid::actors {

using serialization::frame_header;
using serialization::tensor_kind;
using steady = std::chrono::steady_clock;

namespace {

/// Paces writes to `rate_Bps` (0: not at all), 64 KiB at a time, as a link
/// of that rate would deliver them: a slice is handed to the socket when the
/// link would have finished carrying it, so a frame on an idle link arrives
/// whole about `size / rate` after it was sent and leaves no debt for the
/// next one (releasing a slice first and charging its time afterwards would
/// delay the *next* frame instead: a tiny frame behind a big one would wait
/// one slice).
struct pacer {
  /// How far behind schedule a busy link may fall and still catch up: a
  /// thread wakes up late from every sleep, and without this credit each
  /// late wake-up would be lost (at 1000 Mbit/s a 64 KiB slice lasts 0.5 ms,
  /// and a stream reached 0.76 of the rate). A link idle for longer starts
  /// afresh, so a frame on it never arrives early.
  static constexpr auto catch_up = std::chrono::milliseconds(1);
  double rate_Bps = 0;
  steady::time_point next{};
  steady::duration time_of(size_t n) const {
    return std::chrono::duration_cast<steady::duration>(
      std::chrono::duration<double>(static_cast<double>(n) / rate_Bps));
  }
  void before(size_t n) {
    if (rate_Bps <= 0)
      return;
    auto now = steady::now();
    next = (now - next <= catch_up ? next : now) + time_of(n);
    std::this_thread::sleep_until(next);
  }
  /// The socket took `sent` of the `wanted` bytes; the rest is paced again.
  void after(size_t wanted, size_t sent) {
    if (rate_Bps > 0 && sent < wanted)
      next -= time_of(wanted - sent);
  }
};

/// One connection's bytes: the socket itself, or TLS over it.
struct link_io {
  int fd = -1;
  detail::tls_stream* tls = nullptr;
  ssize_t send(const char* p, size_t n, bool more) const {
    if (tls)
      return tls->write(p, n);
    return ::send(fd, p, n, MSG_NOSIGNAL | (more ? MSG_MORE : 0));
  }
  ssize_t recv(char* p, size_t n) const {
    return tls ? tls->read(p, n) : ::recv(fd, p, n, 0);
  }
};

bool write_all(const link_io& io, const char* p, size_t n, pacer& pace, bool more) {
  constexpr size_t slice = 64 << 10;
  while (n > 0) {
    auto want = pace.rate_Bps > 0 ? std::min(n, slice) : n;
    pace.before(want);
    auto k = io.send(p, want, more || want < n);
    if (k < 0 && errno == EINTR) {
      pace.after(want, 0);
      continue;
    }
    if (k <= 0)
      return false;
    pace.after(want, static_cast<size_t>(k));
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

bool read_all(const link_io& io, char* p, size_t n) {
  while (n > 0) {
    auto k = io.recv(p, n);
    if (k < 0 && errno == EINTR)
      continue;
    if (k <= 0)
      return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

addrinfo* resolve(const std::string& host, uint16_t port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  addrinfo* res = nullptr;
  auto service = std::to_string(port);
  auto rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &res);
  if (rc != 0)
    throw std::runtime_error("cannot resolve '" + host + "': " + ::gai_strerror(rc));
  return res;
}

void set_nodelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/// Connects with a timeout; returns -1 and sets `why` on failure.
int open_connection(const std::string& endpoint, std::chrono::milliseconds timeout,
                    std::string& why) {
  addrinfo* res = nullptr;
  try {
    auto [host, port] = parse_endpoint(endpoint);
    res = resolve(host, port, false);
  } catch (const std::exception& e) {
    why = e.what();
    return -1;
  }
  int fd = ::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    ::freeaddrinfo(res);
    why = std::strerror(errno);
    return -1;
  }
  auto flags = ::fcntl(fd, F_GETFL, 0);
  ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  int rc = ::connect(fd, res->ai_addr, res->ai_addrlen);
  ::freeaddrinfo(res);
  if (rc != 0 && errno != EINPROGRESS) {
    why = std::strerror(errno);
    ::close(fd);
    return -1;
  }
  if (rc != 0) {
    pollfd p{fd, POLLOUT, 0};
    rc = ::poll(&p, 1, static_cast<int>(timeout.count()));
    int err = 0;
    socklen_t len = sizeof err;
    if (rc <= 0 || ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0
        || err != 0) {
      why = rc == 0 ? "no connection within " + std::to_string(timeout.count()) + " ms"
                    : std::strerror(err != 0 ? err : errno);
      ::close(fd);
      return -1;
    }
  }
  ::fcntl(fd, F_SETFL, flags);
  set_nodelay(fd);
  return fd;
}

} // namespace

struct data_plane::outgoing {
  struct frame {
    std::array<char, serialization::frame_header_size> header;
    std::string key;
    std::string payload;
  };
  std::string endpoint;
  std::mutex mu;
  std::condition_variable has_frames, has_space;
  std::deque<frame> queue;
  bool stop = false;
  int fd = -1;
  std::unique_ptr<detail::tls_stream> tls;
  std::thread writer;
};

struct data_plane::incoming {
  int fd = -1;
  std::string peer; ///< "address:port", for the log
  std::unique_ptr<detail::tls_stream> tls;
  std::atomic<bool> done{false};
  std::thread reader;
};

std::shared_ptr<data_plane> data_plane::start(options opts) {
  std::shared_ptr<data_plane> dp{new data_plane(std::move(opts))};
  dp->acceptor_ = std::thread([p = dp.get()] { p->accept_loop(); });
  return dp;
}

data_plane::data_plane(options opts) : opts_(std::move(opts)) {
  if (!opts_.tls.empty())
    tls_ = std::make_unique<detail::tls_context>(opts_.tls);
  auto where = opts_.host + ":" + std::to_string(opts_.port);
  auto* res = resolve(opts_.host, opts_.port, true);
  listener_ = ::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  bool ok = listener_ >= 0
            && ::setsockopt(listener_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0
            && ::bind(listener_, res->ai_addr, res->ai_addrlen) == 0
            && ::listen(listener_, 64) == 0;
  ::freeaddrinfo(res);
  if (!ok) {
    auto why = std::string(std::strerror(errno));
    if (listener_ >= 0)
      ::close(listener_);
    throw std::runtime_error("data plane: cannot listen on " + where + ": " + why);
  }
  sockaddr_in bound{};
  socklen_t len = sizeof bound;
  ::getsockname(listener_, reinterpret_cast<sockaddr*>(&bound), &len);
  port_ = ntohs(bound.sin_port);
}

data_plane::~data_plane() { stop(); }

void data_plane::stop() {
  {
    std::lock_guard<std::mutex> guard{mu_};
    if (stopping_.exchange(true))
      return;
  }
  if (acceptor_.joinable())
    acceptor_.join();
  ::close(listener_);
  std::map<std::string, std::shared_ptr<outgoing>> out;
  std::vector<std::unique_ptr<incoming>> in;
  {
    std::lock_guard<std::mutex> guard{mu_};
    out.swap(outgoing_);
    in.swap(incoming_);
    sinks_.clear();
  }
  for (auto& [_, o] : out) {
    {
      std::lock_guard<std::mutex> guard{o->mu};
      o->stop = true;
      if (o->fd >= 0)
        ::shutdown(o->fd, SHUT_RDWR); // wakes a writer blocked on a hung peer
    }
    o->has_frames.notify_all();
    o->has_space.notify_all();
    o->writer.join();
    if (o->fd >= 0)
      ::close(o->fd);
  }
  for (auto& i : in) {
    ::shutdown(i->fd, SHUT_RDWR);
    i->reader.join();
    ::close(i->fd);
  }
}

void data_plane::add_sink(const caf::actor& a) {
  if (!a)
    return;
  {
    std::lock_guard<std::mutex> guard{mu_};
    sinks_[a.id()] = a;
  }
  std::weak_ptr<data_plane> weak = shared_from_this();
  a->attach_functor([weak, id = a.id()] {
    if (auto p = weak.lock())
      p->remove_sink(id);
  });
}

void data_plane::remove_sink(caf::actor_id id) {
  std::lock_guard<std::mutex> guard{mu_};
  sinks_.erase(id);
}

data_plane::counters data_plane::stats() const {
  std::lock_guard<std::mutex> guard{mu_};
  return stats_;
}

std::shared_ptr<data_plane::outgoing>
data_plane::connection_to(const std::string& endpoint) {
  std::lock_guard<std::mutex> guard{mu_};
  if (stopping_)
    return nullptr; // stop() has taken the map already
  auto& slot = outgoing_[endpoint];
  if (!slot) {
    slot = std::make_shared<outgoing>();
    slot->endpoint = endpoint;
    slot->writer = std::thread([this, o = slot.get()] { write_loop(o); });
  }
  return slot;
}

bool data_plane::send(const std::string& endpoint, caf::actor_id destination,
                      serialization::tensor_message m) {
  auto h = serialization::frame_header_of(m, destination);
  auto o = connection_to(endpoint);
  if (!o)
    return false;
  std::unique_lock<std::mutex> lock{o->mu};
  if (!o->has_space.wait_for(lock, opts_.queue_wait, [&] {
        return o->stop || o->queue.size() < opts_.queue_frames;
      })
      || o->stop) {
    lock.unlock();
    count([](counters& c) { ++c.dropped_out; });
    return false;
  }
  o->queue.push_back({serialization::encode_frame_header(h), std::move(m.key),
                      std::move(m.payload)});
  lock.unlock();
  o->has_frames.notify_one();
  return true;
}

void data_plane::write_loop(outgoing* o) {
  pacer pace{opts_.rate_Bps};
  bool reported = false;
  for (;;) {
    outgoing::frame f;
    {
      std::unique_lock<std::mutex> lock{o->mu};
      o->has_frames.wait(lock, [&] { return o->stop || !o->queue.empty(); });
      if (o->stop)
        return;
      f = std::move(o->queue.front());
      o->queue.pop_front();
    }
    o->has_space.notify_one();
    if (o->fd < 0) {
      std::string why;
      int fd = open_connection(o->endpoint, opts_.connect_timeout, why);
      std::unique_ptr<detail::tls_stream> tls;
      if (fd >= 0 && tls_) {
        tls = detail::tls_stream::handshake(*tls_, fd, false,
                                            opts_.handshake_timeout, why);
        if (!tls) {
          why = "TLS handshake failed: " + why;
          ::close(fd);
          fd = -1;
        }
      }
      {
        std::lock_guard<std::mutex> lock{o->mu};
        if (o->stop) {
          if (fd >= 0)
            ::close(fd);
          return;
        }
        o->fd = fd;
        o->tls = std::move(tls);
      }
      if (fd < 0) {
        if (!reported)
          spdlog::warn("data plane: cannot reach {}: {} (frames to it are "
                       "dropped until it answers)", o->endpoint, why);
        reported = true;
        count([](counters& c) { ++c.dropped_out; });
        continue;
      }
      reported = false;
    }
    // MSG_MORE holds a part back only while another part follows: a frame
    // whose key or payload is empty must not leave its header corked.
    link_io io{o->fd, o->tls.get()};
    bool ok = write_all(io, f.header.data(), f.header.size(), pace,
                        !f.key.empty() || !f.payload.empty())
              && write_all(io, f.key.data(), f.key.size(), pace,
                           !f.payload.empty())
              && write_all(io, f.payload.data(), f.payload.size(), pace, false);
    if (ok) {
      count([&](counters& c) {
        ++c.frames_out;
        c.bytes_out += static_cast<int64_t>(f.payload.size());
      });
      continue;
    }
    auto why = std::string(std::strerror(errno));
    count([](counters& c) { ++c.dropped_out; });
    std::lock_guard<std::mutex> lock{o->mu};
    if (o->stop)
      return;
    spdlog::warn("data plane: connection to {} broke: {}", o->endpoint, why);
    o->tls.reset();
    ::close(o->fd);
    o->fd = -1;
  }
}

void data_plane::accept_loop() {
  while (!stopping_) {
    pollfd p{listener_, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0)
      continue;
    sockaddr_in from{};
    socklen_t from_len = sizeof from;
    int fd = ::accept4(listener_, reinterpret_cast<sockaddr*>(&from), &from_len,
                       SOCK_CLOEXEC);
    if (fd < 0)
      continue;
    char address[INET_ADDRSTRLEN] = "?";
    ::inet_ntop(AF_INET, &from.sin_addr, address, sizeof address);
    set_nodelay(fd);
    std::lock_guard<std::mutex> guard{mu_};
    if (stopping_) {
      ::close(fd);
      return;
    }
    // Reap readers whose peer went away.
    for (auto it = incoming_.begin(); it != incoming_.end();)
      if ((*it)->done) {
        (*it)->reader.join();
        ::close((*it)->fd);
        it = incoming_.erase(it);
      } else {
        ++it;
      }
    auto in = std::make_unique<incoming>();
    in->fd = fd;
    in->peer = std::string(address) + ":" + std::to_string(ntohs(from.sin_port));
    in->reader = std::thread([this, p = in.get()] { read_loop(p); });
    incoming_.push_back(std::move(in));
  }
}

void data_plane::read_loop(incoming* in) {
  if (tls_) {
    // In this thread, so a slow or silent peer holds up nobody else.
    std::string why;
    in->tls = detail::tls_stream::handshake(*tls_, in->fd, true,
                                            opts_.handshake_timeout, why);
    if (!in->tls) {
      spdlog::warn("data plane: refused a connection from {}: TLS handshake "
                   "failed: {}",
                   in->peer, why);
      count([](counters& c) { ++c.refused_handshakes; });
      ::shutdown(in->fd, SHUT_RDWR);
      in->done = true;
      return;
    }
  }
  link_io io{in->fd, in->tls.get()};
  std::array<char, serialization::frame_header_size> raw;
  while (read_all(io, raw.data(), raw.size())) {
    frame_header h;
    try {
      h = serialization::decode_frame_header(raw.data(), opts_.limits);
    } catch (const serialization::wire_error& e) {
      spdlog::warn("data plane: closing a connection that sent a bad frame: {}",
                   e.what());
      count([](counters& c) { ++c.bad_connections; });
      break;
    }
    if (const int64_t serving = job_; h.job != serving) {
      // Not this node's job: nothing of it is read, let alone delivered.
      spdlog::warn("data plane: closing a connection that sent {} of job {} "
                   "(this node serves {})",
                   serialization::to_string(h.kind), h.job,
                   serving ? "job " + std::to_string(serving) : std::string("no job"));
      count([](counters& c) { ++c.bad_connections; });
      break;
    }
    std::string key(h.key_size, '\0');
    std::string payload(h.payload_size, '\0');
    if (!read_all(io, key.data(), key.size())
        || !read_all(io, payload.data(), payload.size()))
      break;
    deliver(h, std::move(key), std::move(payload));
  }
  ::shutdown(in->fd, SHUT_RDWR);
  in->done = true;
}

void data_plane::deliver(const frame_header& h, std::string key,
                         std::string payload) {
  if (h.kind == tensor_kind::echo) {
    // A link probe: answer on our own connection to the prober's plane.
    serialization::tensor_message reply;
    reply.kind = tensor_kind::echo_reply;
    reply.job = h.job;
    reply.step = static_cast<int64_t>(payload.size());
    try {
      parse_endpoint(key);
    } catch (const std::exception& e) {
      spdlog::warn("data plane: echo with a bad reply address: {}", e.what());
      return;
    }
    send(key, static_cast<caf::actor_id>(h.step), std::move(reply));
    return;
  }
  caf::actor sink;
  {
    std::lock_guard<std::mutex> guard{mu_};
    ++stats_.frames_in;
    stats_.bytes_in += static_cast<int64_t>(payload.size());
    auto it = sinks_.find(h.destination);
    if (it == sinks_.end()) {
      ++stats_.dropped_in;
      return;
    }
    sink = it->second;
  }
  // The same message a sender in this process would have sent: receivers
  // have one handler for tensors, whichever way they came.
  caf::anon_send(sink, tensor_atom::value,
                 serialization::message_of(h, std::move(key), std::move(payload)));
}

std::string data_endpoint(const std::string& node_endpoint, int64_t data_port) {
  if (data_port <= 0 || data_port > 65535)
    return {};
  return parse_endpoint(node_endpoint).first + ":" + std::to_string(data_port);
}

} // namespace asteroid::actors
