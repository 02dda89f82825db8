#include "tls_context.hpp"

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <stdexcept>

namespace asteroid::actors::detail {

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

void configure_tls(SSL_CTX* ctx, const credentials& c) {
  c.check();
  // AES-128-GCM first (OpenSSL's own order puts AES-256-GCM first): the
  // same TLS 1.3 protection for this use, and a third faster where it counts,
  // every data-plane byte (`openssl speed` on the x86 development machine:
  // 3.5 against 2.7 GB/s; not measured on a Jetson).
  bool ok = ctx && SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) == 1
            && SSL_CTX_set_ciphersuites(ctx, "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:"
                                             "TLS_CHACHA20_POLY1305_SHA256") == 1
            && SSL_CTX_use_certificate_chain_file(ctx, c.cert.c_str()) == 1
            && SSL_CTX_use_PrivateKey_file(ctx, c.key.c_str(), SSL_FILETYPE_PEM) == 1
            && SSL_CTX_check_private_key(ctx) == 1
            && SSL_CTX_load_verify_locations(ctx, c.ca.c_str(), nullptr) == 1;
  if (!ok) {
    // check() read the same files a moment ago; this is rare (a file
    // replaced in between) but must not leave a context that trusts nobody.
    auto why = take_openssl_errors();
    throw std::invalid_argument("credentials: cannot load '" + c.cert + "', '"
                                + c.key + "' and '" + c.ca + "' into TLS"
                                + (why.empty() ? "" : ": " + why));
  }
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT,
                     nullptr);
  // The order above decides on both ends, whatever a peer prefers.
  SSL_CTX_set_options(ctx, SSL_OP_CIPHER_SERVER_PREFERENCE);
  SSL_CTX_set_num_tickets(ctx, 0);
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
}

} // namespace asteroid::actors::detail
