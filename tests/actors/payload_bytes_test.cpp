// How the data plane writes a large payload around the cache
// (actors/src/data_plane/payload_bytes.hpp): the copy is exact at every
// alignment and length and writes nothing outside its target, and growing
// a string leaves what it held.
#include "data_plane/payload_bytes.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using asteroid::actors::detail::can_write_around_cache;
using asteroid::actors::detail::copy_around_cache;
using asteroid::actors::detail::grow_unwritten;

TEST_CASE("a copy around the cache is exact at every alignment and length") {
  const std::vector<size_t> lengths{0, 1, 15, 16, 63, 64, 65, 127, 128, 129,
                                    4096 + 5, (size_t{1} << 20) + 3};
  // Bytes 1-199: never the guards' 0xee.
  std::string from((size_t{1} << 20) + 256, '\0');
  for (size_t i = 0; i < from.size(); ++i)
    from[i] = static_cast<char>(i * 131 % 199 + 1);
  for (auto n : lengths)
    for (size_t to_offset : {0, 1, 7, 16, 33, 63})
      for (size_t from_offset : {0, 5, 64}) {
        // Guards of a byte no copy writes on both sides of the target.
        std::string to(n + 256, '\xee');
        copy_around_cache(to.data() + 64 + to_offset, from.data() + from_offset, n);
        INFO("length " << n << ", target offset " << to_offset << ", source offset "
                       << from_offset);
        REQUIRE(to.compare(64 + to_offset, n, from, from_offset, n) == 0);
        REQUIRE(to.find_first_not_of('\xee') == (n == 0 ? std::string::npos : 64 + to_offset));
        REQUIRE(to.find_last_not_of('\xee') == (n == 0 ? std::string::npos : 64 + to_offset + n - 1));
      }
}

TEST_CASE("a string grown without writing its new bytes keeps what it held") {
  std::string s = "held bytes";
  s.reserve(64);
  grow_unwritten(s, 32);
  REQUIRE(s.size() == 32);
  CHECK(s.compare(0, 10, "held bytes") == 0);
  // Past the capacity it moves, and keeps its bytes.
  grow_unwritten(s, size_t{8} << 20);
  REQUIRE(s.size() == size_t{8} << 20);
  CHECK(s.compare(0, 10, "held bytes") == 0);
  s.back() = 'x';
  CHECK(s.back() == 'x');
}

TEST_CASE("an x86-64 build with libstdc++ 12 or later and its C++11 strings writes "
          "large payloads around the cache") {
  // Elsewhere (aarch64, older compilers, a LibTorch built with the old
  // copy-on-write strings) a large payload is read into place like a small
  // one, which is correct but slower: only the fast path's presence where
  // it should be is this build's to check.
#if defined(__x86_64__) && defined(_GLIBCXX_RELEASE) && _GLIBCXX_RELEASE >= 12 \
  && _GLIBCXX_USE_CXX11_ABI
  CHECK(can_write_around_cache());
#else
  SUCCEED("not an x86-64 build with libstdc++ 12 or later and C++11 strings");
#endif
}
