#include "checksum.hpp"

#include <cstring>

namespace asteroid::serialization::detail {

std::uint64_t checksum64(std::string_view bytes) {
  constexpr std::uint64_t prime = 0x100000001b3ULL;
  std::uint64_t h = 0xcbf29ce484222325ULL ^ bytes.size();
  const char* p = bytes.data();
  std::size_t n = bytes.size();
  // Word-at-a-time FNV-style mixing: one multiply per 8 bytes keeps hashing a
  // multi-GB checkpoint well below the cost of writing it.
  while (n >= 8) {
    std::uint64_t w;
    std::memcpy(&w, p, 8);
    h = (h ^ w) * prime;
    h ^= h >> 32;
    p += 8;
    n -= 8;
  }
  std::uint64_t tail = 0;
  std::memcpy(&tail, p, n);
  h = (h ^ tail ^ (std::uint64_t{n} << 56)) * prime;
  h ^= h >> 29;
  h *= 0xbf58476d1ce4e5b9ULL;
  h ^= h >> 32;
  return h;
}

} // namespace asteroid::serialization::detail
