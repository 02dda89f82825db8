// Compiled as C++23 where the compiler knows it (actors/CMakeLists.txt), for
// std::string::resize_and_overwrite; std::string's layout does not depend
// on the language version, so the strings it grows are the same strings
// the rest of the library (C++17) uses.
#include "payload_bytes.hpp"

#include <cstdint>
#include <cstring>

#if defined(__x86_64__) || defined(_M_X64)
#include <emmintrin.h>
#define ASTEROID_STREAMING_STORES 1
#else
#define ASTEROID_STREAMING_STORES 0
#endif

namespace asteroid::actors::detail {

bool can_write_around_cache() {
#if defined(__cpp_lib_string_resize_and_overwrite) && ASTEROID_STREAMING_STORES
  return true;
#else
  return false;
#endif
}

void grow_unwritten(std::string& s, size_t n) {
#if defined(__cpp_lib_string_resize_and_overwrite) && ASTEROID_STREAMING_STORES
  s.resize_and_overwrite(n, [](char*, size_t m) { return m; });
#else
  s.resize(n);
#endif
}

void copy_around_cache(char* to, const char* from, size_t n) {
#if ASTEROID_STREAMING_STORES
  // Streaming stores need 16-byte aligned targets: the head up to the
  // first 64-byte line and the tail are copied plainly.
  auto head = static_cast<size_t>(-reinterpret_cast<uintptr_t>(to) & 63);
  if (head > n)
    head = n;
  std::memcpy(to, from, head);
  to += head;
  from += head;
  n -= head;
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    auto a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + i));
    auto b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + i + 16));
    auto c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + i + 32));
    auto d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(to + i), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(to + i + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(to + i + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(to + i + 48), d);
  }
  std::memcpy(to + i, from + i, n - i);
  // Streaming stores are not ordered with later ones: without the fence the
  // thread that takes the payload next could read stale lines.
  _mm_sfence();
#else
  std::memcpy(to, from, n);
#endif
}

} // namespace asteroid::actors::detail
