// A fix for CAF 0.17.6's OpenSSL module, which Debian ships as is: every
// SSL_read, SSL_write, SSL_accept and SSL_connect made by any code in this
// program starts with an empty OpenSSL error queue.
//
// Why: OpenSSL reports the outcome of an I/O call through SSL_get_error,
// which looks at the calling thread's error queue, and a caller must empty
// that queue before the call (SSL_get_error(3)). CAF's session does not. Its
// multiplexer thread serves every connection, so when one peer fails the
// TLS handshake (a stranger without the cluster's certificate) or a
// redundant connection between two nodes is closed, the errors left in the
// queue make the next SSL_read on a healthy connection look fatal, and CAF
// drops it. Found on loopback: one refused stranger cut a member's
// connection to a node (its requests timed out), and two nodes that
// connected to each other lost every message between them. Both are tested
// in tests/actors/security_test.cpp.
//
// How: these definitions interpose OpenSSL's (the dynamic linker resolves
// libcaf_openssl's calls to the program's own definition first), empty the
// queue, and call OpenSSL's. `configure` refers to
// `openssl_error_queue_fix_linked` so that this file is linked into every
// program that can turn TLS on.
#include <dlfcn.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include <cstdio>
#include <cstdlib>

namespace asteroid::actors::detail {

bool openssl_error_queue_fix_linked() { return true; }

namespace {

template <class F>
F openssl_function(const char* name) {
  auto* f = reinterpret_cast<F>(::dlsym(RTLD_NEXT, name));
  if (!f) {
    // Unreachable while libssl is linked; say so rather than crash later.
    std::fprintf(stderr, "asteroid: OpenSSL's %s not found: %s\n", name, ::dlerror());
    std::abort();
  }
  return f;
}

} // namespace

} // namespace asteroid::actors::detail

using asteroid::actors::detail::openssl_function;

extern "C" {

int SSL_read(SSL* ssl, void* buf, int num) {
  static auto real = openssl_function<int (*)(SSL*, void*, int)>("SSL_read");
  ERR_clear_error();
  return real(ssl, buf, num);
}

int SSL_write(SSL* ssl, const void* buf, int num) {
  static auto real = openssl_function<int (*)(SSL*, const void*, int)>("SSL_write");
  ERR_clear_error();
  return real(ssl, buf, num);
}

int SSL_accept(SSL* ssl) {
  static auto real = openssl_function<int (*)(SSL*)>("SSL_accept");
  ERR_clear_error();
  return real(ssl);
}

int SSL_connect(SSL* ssl) {
  static auto real = openssl_function<int (*)(SSL*)>("SSL_connect");
  ERR_clear_error();
  return real(ssl);
}

} // extern "C"
