#pragma once
// One data-plane connection's TLS session, driven straight over the
// socket's descriptor instead of through asio::ssl::stream. Asio's stream
// moves every TLS record through a 17 KiB memory buffer and an event-loop
// round per record; here OpenSSL reads ahead as many records as the socket
// holds and one call encrypts or decrypts until the socket would block, so
// a 1 MiB tensor costs a few wake-ups instead of about 64.
//
// The session never waits: each call does what the socket allows now and
// says what it waits for next; link_stream turns that into Asio waits on
// the socket's strand. Every call must come from that strand.
#include <asio/buffer.hpp>
#include <asio/error_code.hpp>

#include <cstddef>
#include <memory>
#include <vector>

typedef struct ssl_st SSL;
typedef struct ssl_ctx_st SSL_CTX;

namespace asteroid::actors::detail {

class tls_session {
public:
  /// What one call achieved.
  struct result {
    enum class next { done, wait_readable, wait_writable };
    next then = next::done;
    size_t bytes = 0;     ///< read or written (done only)
    asio::error_code ec;  ///< set: the session failed (done only)
  };

  /// A session of `ctx`'s settings (tls_context.hpp); throws
  /// std::runtime_error when OpenSSL cannot make one.
  explicit tls_session(SSL_CTX* ctx);
  ~tls_session();
  tls_session(const tls_session&) = delete;
  tls_session& operator=(const tls_session&) = delete;

  /// Binds the session to a connected, non-blocking socket, as the side
  /// that accepted it (`server`) or that connected.
  void attach(int fd, bool server);

  /// Advances the handshake; done without `ec` when it completed (and from
  /// then on, written records are gathered: write()).
  result handshake();
  /// Decrypts into `into` until it is full or the socket holds no more;
  /// done with bytes > 0 as soon as anything arrived. A peer that closed
  /// the connection gives asio::error::eof.
  result read(asio::mutable_buffer into);
  /// Encrypts `from`, in order, until all is encrypted or the socket is
  /// full; done with bytes > 0 as soon as anything was encrypted. Records
  /// are gathered (up to 256 KiB) and sent together, so a call that stops
  /// part-way may leave its last records gathered: the caller calls again
  /// with the rest, as asio::async_write does, until all its bytes are
  /// reported. A call that encrypted all of `from` ends only when the socket
  /// has taken every gathered record, or waits for it, and then the next
  /// call, with the same `from`, finishes the sending.
  result write(const std::vector<asio::const_buffer>& from);

private:
  /// Puts the gather buffer in front of the write side; once.
  result start_gathering();
  /// Sends the gathered records; done with `encrypted` bytes once all went.
  result flush(size_t encrypted);

  /// The error OpenSSL reports for a call that returned `ret`, as a wait or
  /// an error code; the thread's OpenSSL error queue is emptied.
  result failure(int ret);

  SSL* ssl_ = nullptr;
  int fd_ = -1;
  bool gathering_ = false;
  /// Bytes of the caller's last write that were encrypted but whose records
  /// the socket has not taken yet (0: none).
  size_t unsent_ = 0;
};

} // namespace asteroid::actors::detail
