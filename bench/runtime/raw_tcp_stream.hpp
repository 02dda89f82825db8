#pragma once
// A raw-TCP anchor for the data plane's streams, beside iperf3's: on
// loopback in this process, or between two processes (a testbed's network
// namespaces, bench/runtime/veth_streams.sh).
// iperf3 writes one 1 MiB buffer again and again and reads into another,
// both hot in the cache; a stream of tensors moves distinct memory. This
// anchor moves what a data-plane stream moves (`count` distinct payloads of
// `bytes`, made before the clock starts), with nothing else: one persistent
// connection, plain blocking calls of at most 1 MiB, and on the other side a
// fresh uninitialised buffer per payload (a tensor needs bytes of its own),
// no framing, acknowledgements or event loop (and on loopback no second
// process).
#include <cstdint>
#include <string>

namespace asteroid::bench {

/// Bytes per second of the second of two streams from this thread to a
/// receiving thread over 127.0.0.1:`port` (the first warms the connection
/// up, as the data plane's probe does); 0, and a message on stderr, when a
/// socket call fails. Every wait is bounded (10 s per call).
double raw_tcp_stream_Bps(uint16_t port, int64_t bytes, int count);

/// The receiving side on its own: listens on `ip`:`port` (IPv4), takes one
/// connection's two streams; false, and a message on stderr, when a call
/// failed or no sender came within 10 s.
bool raw_tcp_receive(const std::string& ip, uint16_t port, int64_t bytes, int count);

/// The sending side on its own, to a raw_tcp_receive at `ip`:`port`: bytes
/// per second of the second stream, as raw_tcp_stream_Bps; 0, and a message
/// on stderr, when a call failed.
double raw_tcp_send_Bps(const std::string& ip, uint16_t port, int64_t bytes, int count);

} // namespace asteroid::bench
