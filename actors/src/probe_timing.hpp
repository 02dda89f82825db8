#pragma once
// How the node side of a link probe times its echoes (`ast_probe` in
// device.cpp): round trips of two sizes, and streams of payloads.
#include "asteroid/serialization/tensor_message.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace asteroid::actors::detail {

/// Whether `reply` answers the echo tagged `tag` (the echo's generation,
/// which the peer copies into its answer). A peer answers an echo that was
/// written again after a broken connection once more, and such a second
/// answer, or a late one, must not be taken for the next echo's. Tag 0 is
/// the answer of a node older than tags, taken as before.
inline bool answers_echo(const serialization::tensor_message& reply, int64_t tag) {
  return reply.kind == serialization::tensor_kind::echo_reply
         && (reply.generation == tag || reply.generation == 0);
}

/// Fastest of `repeats` round trips `echo(bytes)` for a 1-byte payload and
/// for a `bytes`-sized one (negative: an echo was lost). The two sizes take
/// turns so that a busy spell of the host slows both alike, and the fastest
/// trip is kept because queueing behind other work only ever adds time. Each
/// trip sends a fresh copy made just before the clock starts: the probe times
/// the transport (as the raw-TCP comparison, which resends one buffer, does),
/// with the bytes as warm in cache as a tensor encoded just before its send.
/// The first pair warms the path up and is not timed.
struct round_trips {
  double tiny_s = -1;
  double big_s = -1;
};

template <class Echo>
round_trips fastest_round_trips(int64_t bytes, int repeats, Echo&& echo) {
  const std::string tiny(1, 'x'), big(static_cast<size_t>(bytes), 'x');
  // Seconds of one round trip, negative when the echo was lost.
  auto time_one = [&](const std::string& payload) {
    std::string copy = payload;
    auto t0 = std::chrono::steady_clock::now();
    if (!echo(std::move(copy)))
      return -1.0;
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
      .count();
  };
  if (time_one(tiny) < 0 || time_one(big) < 0)
    return {};
  round_trips best{std::numeric_limits<double>::max(),
                   std::numeric_limits<double>::max()};
  for (int i = 0; i < repeats; ++i) {
    auto t = time_one(tiny), b = time_one(big);
    if (t < 0 || b < 0)
      return {};
    best.tiny_s = std::min(best.tiny_s, t);
    best.big_s = std::min(best.big_s, b);
  }
  return best;
}

/// Seconds until `count` payloads of `bytes`, sent back to back through
/// `send(payload, answer)`, have all arrived, as a stage streams its
/// micro-batches; negative when the echo was lost. Only the last payload
/// asks for an echo (`answer`), which the peer sends once it has taken in
/// every payload before it (one connection, in order): an echo of each
/// would time the prober's wake-ups too, which iperf3, the anchor, does not
/// pay. (A stage's sender does hear back once per micro-batch, its credit
/// over CAF; the probe times the transport without it.) The copies are made
/// before the clock starts, as tensors encoded before their sends. One
/// untimed stream warms the connection up first: TCP grows its window with
/// use, and a fresh loopback connection's first stream is several times
/// slower than the next ones.
template <class Send, class Await>
double stream_seconds(int64_t bytes, int count, Send&& send, Await&& await_echo) {
  auto one_stream = [&]() -> double {
    std::vector<std::string> payloads(static_cast<size_t>(count),
                                      std::string(static_cast<size_t>(bytes), 'x'));
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < count; ++i)
      if (!send(std::move(payloads[static_cast<size_t>(i)]), i + 1 == count))
        return -1;
    if (!await_echo())
      return -1;
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
      .count();
  };
  return one_stream() < 0 ? -1 : one_stream();
}

/// How often the bandwidth payload may grow fourfold when it does not take
/// measurably longer than a tiny one (1 MiB grows to at most 64 MiB).
constexpr int max_probe_growths = 3;

} // namespace asteroid::actors::detail
