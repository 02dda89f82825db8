#pragma once
// TLS for the data plane's own connections, with the cluster's credentials:
// a context made once per data plane, and one stream per connection over a
// connected blocking socket. Both sides show a certificate signed by the
// cluster's CA (TLS 1.3 only: every peer is an Asteroid node of the same
// build), so a peer without one is dropped in the handshake, before any of
// its bytes is read as a frame.
#include "asteroid/actors/credentials.hpp"

#include <chrono>
#include <memory>
#include <string>
#include <sys/types.h>

typedef struct ssl_ctx_st SSL_CTX;
typedef struct ssl_st SSL;

namespace asteroid::actors::detail {

class tls_context {
public:
  /// Checks `c` (credentials::check) and loads it; throws
  /// std::invalid_argument naming the file on bad credentials.
  explicit tls_context(const credentials& c);
  ~tls_context();
  tls_context(const tls_context&) = delete;
  tls_context& operator=(const tls_context&) = delete;
  SSL_CTX* native() const { return ctx_; }

private:
  SSL_CTX* ctx_ = nullptr;
};

/// One TLS connection on a socket the caller owns (closes) and keeps open
/// while the stream lives. Reads and writes block; a `shutdown` of the
/// socket wakes them with an error. SIGPIPE is blocked in the calling
/// thread (OpenSSL writes with plain `write`).
class tls_stream {
public:
  /// The handshake, as server or client, done within `timeout`; null and
  /// `why` set when the peer has no valid certificate, speaks no TLS, or is
  /// too slow.
  static std::unique_ptr<tls_stream> handshake(const tls_context& ctx, int fd,
                                               bool server,
                                               std::chrono::milliseconds timeout,
                                               std::string& why);
  ~tls_stream();
  tls_stream(const tls_stream&) = delete;
  tls_stream& operator=(const tls_stream&) = delete;
  /// Like recv/send: bytes moved, or <= 0 when the connection is closed or
  /// broken.
  ssize_t read(char* p, size_t n);
  ssize_t write(const char* p, size_t n);

private:
  explicit tls_stream(SSL* ssl) : ssl_(ssl) {}
  SSL* ssl_;
};

/// OpenSSL's queued errors of the calling thread as text, the queue emptied;
/// empty when there are none.
std::string take_openssl_errors();

/// Blocks SIGPIPE in the calling thread, for good: a write to a peer that
/// went away must fail with EPIPE, not end the node.
void block_sigpipe_in_this_thread();

} // namespace asteroid::actors::detail
