#pragma once
// One data-plane connection's byte stream: the TCP socket itself, or TLS
// over it (the cluster's credentials). Asio's composed operations
// (asio::async_read, asio::async_write) drive either kind through these
// members, so the code that reads and writes frames exists once.
#include <asio.hpp>
#include <asio/ssl.hpp>

#include <optional>
#include <utility>

namespace asteroid::actors::detail {

class link_stream {
public:
  using executor_type = asio::any_io_executor;

  /// `tls` null: plain TCP. The socket's executor (a strand) runs every
  /// completion of this stream.
  link_stream(asio::ip::tcp::socket socket, asio::ssl::context* tls) {
    if (tls)
      ssl_.emplace(std::move(socket), *tls);
    else
      plain_.emplace(std::move(socket));
  }

  executor_type get_executor() { return socket().get_executor(); }
  asio::ip::tcp::socket& socket() { return ssl_ ? ssl_->next_layer() : *plain_; }
  bool tls() const { return ssl_.has_value(); }

  template <class Buffers, class Handler>
  void async_read_some(const Buffers& buffers, Handler&& handler) {
    if (ssl_)
      ssl_->async_read_some(buffers, std::forward<Handler>(handler));
    else
      plain_->async_read_some(buffers, std::forward<Handler>(handler));
  }

  template <class Buffers, class Handler>
  void async_write_some(const Buffers& buffers, Handler&& handler) {
    if (ssl_)
      ssl_->async_write_some(buffers, std::forward<Handler>(handler));
    else
      plain_->async_write_some(buffers, std::forward<Handler>(handler));
  }

  /// TLS only.
  template <class Handler>
  void async_handshake(bool server, Handler&& handler) {
    ssl_->async_handshake(server ? asio::ssl::stream_base::server
                                 : asio::ssl::stream_base::client,
                          std::forward<Handler>(handler));
  }

  /// Ends the connection at once; pending operations complete with an
  /// error. No TLS close_notify: the peer learns of it from the socket.
  void close() {
    asio::error_code ignored;
    socket().shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
    socket().close(ignored);
  }

private:
  std::optional<asio::ip::tcp::socket> plain_;
  std::optional<asio::ssl::stream<asio::ip::tcp::socket>> ssl_;
};

} // namespace asteroid::actors::detail
