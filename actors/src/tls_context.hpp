#pragma once
// TLS settings of the data plane's connections with the cluster's
// credentials (credentials.hpp): both sides show a certificate signed by
// the cluster's CA, TLS 1.3 only (every peer is an Asteroid node of the
// same build), so a peer without one is dropped in the handshake, before
// any of its bytes is read as a frame.
#include "asteroid/actors/credentials.hpp"

#include <string>

typedef struct ssl_ctx_st SSL_CTX;

namespace asteroid::actors::detail {

/// Checks `c` (credentials::check) and loads it into `ctx`: its certificate
/// and key, the cluster's CA as the only trust anchor, a peer certificate
/// required in both directions, no session tickets (connections are
/// long-lived and never resumed). Throws std::invalid_argument naming the
/// file on bad credentials.
void configure_tls(SSL_CTX* ctx, const credentials& c);

/// OpenSSL's queued errors of the calling thread as text, the queue emptied;
/// empty when there are none.
std::string take_openssl_errors();

} // namespace asteroid::actors::detail
