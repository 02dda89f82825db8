#pragma once

// Internal to asteroid_data: portable random helpers. The std distributions are
// implementation-defined, so results would differ between standard libraries.

#include <cstdint>
#include <random>

namespace asteroid::data::detail {

/// SplitMix64 finaliser: spreads nearby seeds (0, 1, 2, ...) over the whole state space.
inline uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/// A seed derived from a base seed and a sub-stream number (epoch, split, ...).
inline uint64_t derive_seed(uint64_t seed, uint64_t stream) {
  return mix64(mix64(seed) ^ mix64(stream + 0x632be59bd9b4e019ULL));
}

/// A uniform integer in [0, n), n > 0, without modulo bias.
inline uint64_t uniform_below(std::mt19937_64& rng, uint64_t n) {
  uint64_t threshold = (0 - n) % n; // 2^64 mod n
  for (;;) {
    uint64_t r = rng();
    if (r >= threshold)
      return r % n;
  }
}

/// A uniform double in [0, 1) from the top 53 bits.
inline double uniform_unit(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * 0x1.0p-53;
}

} // namespace asteroid::data::detail
