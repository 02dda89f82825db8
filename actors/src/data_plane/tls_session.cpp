#include "tls_session.hpp"

#include <asio/error.hpp>
#include <asio/ssl/error.hpp>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include <cerrno>
#include <cstdint>
#include <stdexcept>
#include <string>

#include <sys/socket.h>

namespace asteroid::actors::detail {

namespace {

/// Ciphertext OpenSSL reads from the socket at once (read-ahead): many
/// 16 KiB records per system call while a tensor streams in.
constexpr size_t read_ahead_bytes = size_t{256} << 10;

/// Ciphertext gathered before it is sent: many 16 KiB records per send(2).
/// A send per record costs what 16 KiB writes cost: on the loopback where
/// iperf3 moved 3.7 GB/s in 1 MiB writes, it moved 1.56 GB/s in 16 KiB ones.
constexpr int write_gather_bytes = 256 << 10;

int fd_of(BIO* b) {
  return static_cast<int>(reinterpret_cast<intptr_t>(BIO_get_data(b)));
}

bool would_block(int e) { return e == EAGAIN || e == EWOULDBLOCK || e == EINTR; }

// OpenSSL's own socket BIO writes with write(2), which raises SIGPIPE when
// the peer is gone and would end the node; send(2) with MSG_NOSIGNAL
// reports EPIPE instead, as Asio's own writes do.
int socket_write(BIO* b, const char* data, int n) {
  BIO_clear_retry_flags(b);
  auto r = ::send(fd_of(b), data, static_cast<size_t>(n), MSG_NOSIGNAL);
  if (r < 0 && would_block(errno))
    BIO_set_retry_write(b);
  return static_cast<int>(r);
}

int socket_read(BIO* b, char* data, int n) {
  BIO_clear_retry_flags(b);
  auto r = ::recv(fd_of(b), data, static_cast<size_t>(n), 0);
  if (r < 0 && would_block(errno))
    BIO_set_retry_read(b);
  return static_cast<int>(r);
}

long socket_ctrl(BIO*, int cmd, long, void*) { return cmd == BIO_CTRL_FLUSH ? 1 : 0; }

BIO_METHOD* socket_method() {
  static BIO_METHOD* method = [] {
    auto* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK,
                           "asteroid data-plane socket");
    if (!m)
      return m;
    BIO_meth_set_write(m, socket_write);
    BIO_meth_set_read(m, socket_read);
    BIO_meth_set_ctrl(m, socket_ctrl);
    return m;
  }();
  return method;
}

/// A BIO of this file's method on socket `fd` (null when OpenSSL cannot).
BIO* socket_bio(int fd) {
  auto* method = socket_method();
  BIO* bio = method ? BIO_new(method) : nullptr;
  if (bio) {
    BIO_set_data(bio, reinterpret_cast<void*>(static_cast<intptr_t>(fd)));
    BIO_set_init(bio, 1);
  }
  return bio;
}

} // namespace

tls_session::tls_session(SSL_CTX* ctx) : ssl_(ctx ? SSL_new(ctx) : nullptr) {
  if (!ssl_) {
    ERR_clear_error();
    throw std::runtime_error("data plane: OpenSSL cannot make a TLS session");
  }
  // Partial writes: each SSL_write_ex ends after a whole record, so a
  // write that the socket stops part-way reports what it wrote, as a
  // socket's write does. The buffer may move between a retried write's
  // calls (the same bytes, reached through another buffer sequence).
  SSL_set_mode(ssl_, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  // Frames carry their lengths, so a connection that ends without TLS's
  // close_notify is an ordinary end of stream (links close abruptly).
  SSL_set_options(ssl_, SSL_OP_IGNORE_UNEXPECTED_EOF);
  SSL_set_read_ahead(ssl_, 1);
  SSL_set_default_read_buffer_len(ssl_, read_ahead_bytes);
}

tls_session::~tls_session() { SSL_free(ssl_); }

void tls_session::attach(int fd, bool server) {
  // One socket BIO to read and another to write (each BIO has one owner:
  // the session frees both, and the socket stays Asio's); the writing one
  // gets the gather buffer in front of it once the handshake is done.
  fd_ = fd;
  BIO* rbio = socket_bio(fd);
  BIO* wbio = socket_bio(fd);
  if (!rbio || !wbio) {
    BIO_free(rbio);
    BIO_free(wbio);
    ERR_clear_error();
    throw std::runtime_error("data plane: OpenSSL cannot wrap a socket");
  }
  SSL_set_bio(ssl_, rbio, wbio);
  if (server)
    SSL_set_accept_state(ssl_);
  else
    SSL_set_connect_state(ssl_);
}

tls_session::result tls_session::handshake() {
  errno = 0;
  ERR_clear_error();
  int ret = SSL_do_handshake(ssl_);
  if (ret != 1)
    return failure(ret);
  return start_gathering();
}

tls_session::result tls_session::start_gathering() {
  // Not during the handshake: OpenSSL puts a buffer of its own in front of
  // the write BIO then, and OpenSSL 3.0's buffer does not pass on the
  // socket's "try again" when it flushes through another buffer, so a
  // handshake message the socket could not take at once would fail the
  // handshake. Not before it either: a stranger dropped in the handshake
  // never costs the 256 KiB.
  if (gathering_)
    return {};
  BIO* gather = BIO_new(BIO_f_buffer());
  BIO* wbio = socket_bio(fd_);
  if (!gather || !wbio || BIO_set_write_buffer_size(gather, write_gather_bytes) != 1) {
    BIO_free(gather);
    BIO_free(wbio);
    ERR_clear_error();
    return {result::next::done, 0, asio::error_code(asio::error::no_memory)};
  }
  SSL_set0_wbio(ssl_, BIO_push(gather, wbio)); // frees the plain one
  gathering_ = true;
  return {};
}

tls_session::result tls_session::read(asio::mutable_buffer into) {
  auto* at = static_cast<char*>(into.data());
  size_t total = 0;
  while (total < into.size()) {
    errno = 0;
    ERR_clear_error();
    size_t n = 0;
    int ret = SSL_read_ex(ssl_, at + total, into.size() - total, &n);
    if (ret == 1) {
      total += n;
      continue;
    }
    if (total == 0)
      return failure(ret);
    ERR_clear_error(); // a failure past the first bytes shows again next call
    break;
  }
  return {result::next::done, total, {}};
}

tls_session::result tls_session::write(const std::vector<asio::const_buffer>& from) {
  // A call after one that waited for the socket to take gathered records:
  // `from` is the same bytes again, already encrypted; send what is left.
  if (unsent_ > 0)
    return flush(unsent_);
  size_t total = 0;
  for (const auto& b : from) {
    auto* at = static_cast<const char*>(b.data());
    for (size_t done = 0; done < b.size();) {
      errno = 0;
      ERR_clear_error();
      size_t n = 0;
      int ret = SSL_write_ex(ssl_, at + done, b.size() - done, &n);
      if (ret == 1) {
        done += n;
        total += n;
        continue;
      }
      if (total == 0)
        return failure(ret);
      // The caller's next write starts where this one stopped, which is
      // what OpenSSL needs to finish a record the socket took in part
      // (the records before it wait in the gather buffer and go out with
      // the next ones).
      ERR_clear_error();
      return {result::next::done, total, {}};
    }
  }
  return flush(total);
}

tls_session::result tls_session::flush(size_t encrypted) {
  BIO* wbio = SSL_get_wbio(ssl_);
  errno = 0;
  ERR_clear_error();
  if (BIO_flush(wbio) == 1) {
    unsent_ = 0;
    return {result::next::done, encrypted, {}};
  }
  if (BIO_should_retry(wbio)) {
    // Reported once the socket took it all: a caller that stopped writing
    // now would leave the peer short of the records still gathered here.
    unsent_ = encrypted;
    return {result::next::wait_writable, 0, {}};
  }
  const int saved_errno = errno;
  ERR_clear_error();
  unsent_ = 0;
  return {result::next::done, 0,
          saved_errno != 0
            ? asio::error_code(saved_errno, asio::error::get_system_category())
            : asio::error_code(asio::error::connection_aborted)};
}

tls_session::result tls_session::failure(int ret) {
  const int saved_errno = errno;
  result r;
  switch (SSL_get_error(ssl_, ret)) {
  case SSL_ERROR_WANT_READ:
    r.then = result::next::wait_readable;
    break;
  case SSL_ERROR_WANT_WRITE:
    r.then = result::next::wait_writable;
    break;
  case SSL_ERROR_ZERO_RETURN:
    r.ec = asio::error::eof;
    break;
  case SSL_ERROR_SYSCALL:
    // A socket that would block, reported without OpenSSL's retry flag: a
    // message OpenSSL writes itself after the handshake (a key update's
    // answer) flushed through its own buffer and then the gather buffer,
    // which in OpenSSL 3.0 drops the flag on the way (start_gathering).
    // Reads set the flag themselves, so this is a write waiting.
    if (would_block(saved_errno)) {
      r.then = result::next::wait_writable;
      break;
    }
    r.ec = saved_errno == 0 ? asio::error_code(asio::error::eof)
                            : asio::error_code(saved_errno, asio::error::get_system_category());
    break;
  default: {
    auto code = ERR_peek_last_error();
    r.ec = code ? asio::error_code(static_cast<int>(code), asio::error::get_ssl_category())
                : asio::error_code(asio::error::connection_aborted);
    break;
  }
  }
  ERR_clear_error();
  return r;
}

} // namespace asteroid::actors::detail
