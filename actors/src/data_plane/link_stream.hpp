#pragma once
// One data-plane connection's byte stream: the TCP socket itself, or TLS
// over it (the cluster's credentials, tls_session.hpp). Asio's composed
// operations (asio::async_read, asio::async_write) drive either kind
// through these members, so the code that reads and writes frames exists
// once.
#include "tls_session.hpp"

#include <asio.hpp>
#include <asio/ssl/context.hpp>

#include <memory>
#include <optional>
#include <utility>
#include <vector>

namespace asteroid::actors::detail {

/// The completion condition for asio::async_read and asio::async_write on a
/// link: the whole buffer sequence, each read_some or write_some taking as
/// much as the socket allows, up to `piece` bytes. asio::transfer_all()
/// (their default) caps each call at 64 KiB, and every call then goes back
/// through the event loop: 9,224 sendmsg and 17,470 epoll_wait calls per
/// 512 MiB sent on loopback, which held the data plane to 0.64-0.91 of
/// iperf3's rate there. With no cap at all a 16 MiB frame went to the kernel
/// as one writev, and streams of them ran at 2.6-3.6 GB/s where 1 MiB calls
/// ran at 3.2-4.4 GB/s (loopback, one program, two alternating rounds of
/// five streams; likely because the receiver then copies each piece out
/// while the sender's copy of it is still in cache). 256 and 512 KiB calls
/// were slower again, 2 and 4 MiB no faster.
struct transfer_whole {
  static constexpr size_t piece = size_t{1} << 20;
  size_t operator()(const asio::error_code& ec, size_t) const {
    return ec ? 0 : piece;
  }
};

class link_stream {
public:
  using executor_type = asio::any_io_executor;

  /// `tls` null: plain TCP. The socket's executor (a strand) runs every
  /// completion of this stream, and every call must come from it.
  link_stream(asio::ip::tcp::socket socket, asio::ssl::context* tls)
    : socket_(std::move(socket)) {
    if (tls)
      tls_.emplace(tls->native_handle());
  }

  executor_type get_executor() { return socket_.get_executor(); }
  asio::ip::tcp::socket& socket() { return socket_; }
  bool tls() const { return tls_.has_value(); }

  template <class Buffers, class Handler>
  void async_read_some(const Buffers& buffers, Handler&& handler) {
    if (!tls_)
      return socket_.async_read_some(buffers, std::forward<Handler>(handler));
    asio::mutable_buffer into;
    for (auto i = asio::buffer_sequence_begin(buffers);
         i != asio::buffer_sequence_end(buffers) && into.size() == 0; ++i)
      into = *i;
    tls_read(into, std::forward<Handler>(handler));
  }

  template <class Buffers, class Handler>
  void async_write_some(const Buffers& buffers, Handler&& handler) {
    if (!tls_)
      return socket_.async_write_some(buffers, std::forward<Handler>(handler));
    tls_write(std::vector<asio::const_buffer>(asio::buffer_sequence_begin(buffers),
                                              asio::buffer_sequence_end(buffers)),
              std::forward<Handler>(handler));
  }

  /// TLS only; `handler(error_code)`.
  template <class Handler>
  void async_handshake(bool server, Handler&& handler) {
    asio::error_code ec;
    if (socket_.is_open())
      socket_.non_blocking(true, ec); // the session reads and writes it directly
    if (!socket_.is_open() || ec)
      return finish([h = std::forward<Handler>(handler)](const asio::error_code& e,
                                                         size_t) mutable { h(e); },
                    ec ? ec : asio::error::bad_descriptor, 0);
    tls_->attach(static_cast<int>(socket_.native_handle()), server);
    tls_handshake([h = std::forward<Handler>(handler)](const asio::error_code& e,
                                                       size_t) mutable { h(e); });
  }

  /// Ends the connection at once; pending operations complete with an
  /// error. No TLS close_notify: the peer learns of it from the socket.
  void close() {
    asio::error_code ignored;
    socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
  }

private:
  using next = tls_session::result::next;

  // Each step asks the session for what the socket allows now; a closed
  // socket is never handed to OpenSSL again (its descriptor number may
  // already belong to another connection).
  template <class Handler>
  void tls_handshake(Handler handler) {
    if (!socket_.is_open())
      return finish(std::move(handler), asio::error::operation_aborted, 0);
    settle(tls_->handshake(), [this](Handler h) { tls_handshake(std::move(h)); },
           std::move(handler));
  }

  template <class Handler>
  void tls_read(asio::mutable_buffer into, Handler handler) {
    if (!socket_.is_open())
      return finish(std::move(handler), asio::error::operation_aborted, 0);
    if (into.size() == 0)
      return finish(std::move(handler), {}, 0);
    settle(tls_->read(into), [this, into](Handler h) { tls_read(into, std::move(h)); },
           std::move(handler));
  }

  template <class Handler>
  void tls_write(std::vector<asio::const_buffer> from, Handler handler) {
    if (!socket_.is_open())
      return finish(std::move(handler), asio::error::operation_aborted, 0);
    auto r = tls_->write(from);
    settle(r,
           [this, from = std::move(from)](Handler h) mutable {
             tls_write(std::move(from), std::move(h));
           },
           std::move(handler));
  }

  /// Completes with `r`, or waits for the socket and tries again.
  template <class Retry, class Handler>
  void settle(const tls_session::result& r, Retry retry, Handler handler) {
    if (r.then == next::done)
      return finish(std::move(handler), r.ec, r.bytes);
    socket_.async_wait(r.then == next::wait_readable ? asio::ip::tcp::socket::wait_read
                                                     : asio::ip::tcp::socket::wait_write,
                       [retry = std::move(retry),
                        h = std::move(handler)](const asio::error_code& ec) mutable {
                         if (ec)
                           return h(ec, size_t{0});
                         retry(std::move(h));
                       });
  }

  /// Asio never completes an operation inside the call that started it
  /// (composed reads and writes rely on that), so neither does this.
  template <class Handler>
  void finish(Handler handler, asio::error_code ec, size_t n) {
    asio::post(socket_.get_executor(),
               [h = std::move(handler), ec, n]() mutable { h(ec, n); });
  }

  asio::ip::tcp::socket socket_;
  std::optional<tls_session> tls_;
};

} // namespace asteroid::actors::detail
