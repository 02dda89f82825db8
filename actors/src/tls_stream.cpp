#include "tls_stream.hpp"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <stdexcept>

namespace asteroid::actors::detail {

namespace {

std::string ssl_error_text(SSL* ssl, int rc) {
  auto kind = SSL_get_error(ssl, rc);
  std::string out = take_openssl_errors();
  if (auto v = SSL_get_verify_result(ssl); v != X509_V_OK)
    out += std::string(out.empty() ? "" : "; ") + "peer certificate: "
           + X509_verify_cert_error_string(v);
  if (!out.empty())
    return out;
  switch (kind) {
    case SSL_ERROR_ZERO_RETURN:
      return "the peer closed the connection";
    case SSL_ERROR_WANT_READ:
    case SSL_ERROR_WANT_WRITE:
      return "no handshake within the time allowed";
    case SSL_ERROR_SYSCALL:
      return "the connection closed during the handshake";
    default:
      return "TLS error " + std::to_string(kind);
  }
}

void set_io_timeout(int fd, std::chrono::milliseconds t) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(t.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((t.count() % 1000) * 1000);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

} // namespace

std::string take_openssl_errors() {
  std::string out;
  while (auto e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    out += out.empty() ? "" : "; ";
    out += buf;
  }
  return out;
}

tls_context::tls_context(const credentials& c) {
  c.check();
  ctx_ = SSL_CTX_new(TLS_method());
  bool ok = ctx_ && SSL_CTX_set_min_proto_version(ctx_, TLS1_3_VERSION) == 1
            && SSL_CTX_use_certificate_chain_file(ctx_, c.cert.c_str()) == 1
            && SSL_CTX_use_PrivateKey_file(ctx_, c.key.c_str(), SSL_FILETYPE_PEM) == 1
            && SSL_CTX_check_private_key(ctx_) == 1
            && SSL_CTX_load_verify_locations(ctx_, c.ca.c_str(), nullptr) == 1;
  if (!ok) {
    // check() read the same files a moment ago; this is rare (a file
    // replaced in between) but must not leave a context that trusts nobody.
    ERR_clear_error();
    if (ctx_)
      SSL_CTX_free(ctx_);
    throw std::invalid_argument("credentials: cannot load '" + c.cert + "', '"
                                + c.key + "' and '" + c.ca + "' into TLS");
  }
  SSL_CTX_set_verify(ctx_, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT,
                     nullptr);
  // Connections are long-lived and never resumed: no session tickets.
  SSL_CTX_set_num_tickets(ctx_, 0);
  SSL_CTX_set_session_cache_mode(ctx_, SSL_SESS_CACHE_OFF);
  SSL_CTX_set_mode(ctx_, SSL_MODE_AUTO_RETRY);
}

tls_context::~tls_context() { SSL_CTX_free(ctx_); }

std::unique_ptr<tls_stream> tls_stream::handshake(const tls_context& ctx, int fd,
                                                  bool server,
                                                  std::chrono::milliseconds timeout,
                                                  std::string& why) {
  block_sigpipe_in_this_thread();
  SSL* ssl = SSL_new(ctx.native());
  if (!ssl || SSL_set_fd(ssl, fd) != 1) {
    why = "cannot create a TLS session";
    ERR_clear_error();
    SSL_free(ssl);
    return nullptr;
  }
  // A peer that connects and says nothing must not hold a thread forever.
  set_io_timeout(fd, timeout);
  ERR_clear_error();
  int rc = server ? SSL_accept(ssl) : SSL_connect(ssl);
  if (rc != 1) {
    why = ssl_error_text(ssl, rc);
    SSL_free(ssl);
    set_io_timeout(fd, std::chrono::milliseconds(0));
    return nullptr;
  }
  set_io_timeout(fd, std::chrono::milliseconds(0));
  return std::unique_ptr<tls_stream>(new tls_stream(ssl));
}

tls_stream::~tls_stream() { SSL_free(ssl_); }

ssize_t tls_stream::read(char* p, size_t n) {
  size_t got = 0;
  ERR_clear_error(); // SSL_get_error(3): the queue must be empty before the call
  if (SSL_read_ex(ssl_, p, n, &got) != 1) {
    ERR_clear_error();
    return -1;
  }
  return static_cast<ssize_t>(got);
}

ssize_t tls_stream::write(const char* p, size_t n) {
  size_t put = 0;
  ERR_clear_error();
  if (SSL_write_ex(ssl_, p, n, &put) != 1) {
    ERR_clear_error();
    return -1;
  }
  return static_cast<ssize_t>(put);
}

void block_sigpipe_in_this_thread() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

} // namespace asteroid::actors::detail
