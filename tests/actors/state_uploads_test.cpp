// Unit tests of what a node keeps of stage states sent in pieces
// (state_uploads.hpp): order, sizes, the memory bound, eviction.
#include "asteroid/actors/state_uploads.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

using namespace asteroid;
using actors::state_piece_bytes;

namespace {
std::string bytes_of(int64_t n, char c = 'x') { return std::string(static_cast<size_t>(n), c); }
} // namespace

TEST_CASE("state_uploads: pieces in order make the state, which is taken once") {
  actors::state_uploads up{64 << 20};
  const int64_t total = 2 * state_piece_bytes + 5;
  actors::state_uploads::key k{7, 1};
  CHECK(up.append(k, total, 0, bytes_of(state_piece_bytes, 'a')).empty());
  CHECK(up.append(k, total, state_piece_bytes, bytes_of(state_piece_bytes, 'b')).empty());
  std::string why;
  CHECK_FALSE(up.take(k, why)); // 5 bytes missing
  CHECK_THAT(why, Catch::Contains("of its " + std::to_string(total)));
  CHECK(up.append(k, total, 2 * state_piece_bytes, "ccccc").empty());
  CHECK(up.bytes() == static_cast<uint64_t>(total));
  auto got = up.take(k, why);
  REQUIRE(got);
  CHECK(got->size() == static_cast<size_t>(total));
  CHECK(got->substr(0, 1) == "a");
  CHECK(got->substr(static_cast<size_t>(state_piece_bytes), 1) == "b");
  CHECK(got->substr(static_cast<size_t>(total - 5)) == "ccccc");
  CHECK(up.bytes() == 0);
  CHECK_FALSE(up.take(k, why));
  CHECK_THAT(why, Catch::Contains("no upload 1"));
}

TEST_CASE("state_uploads: an upload's buffer is its announced size from the first piece on "
          "(arriving pieces never move what arrived)") {
  actors::state_uploads up{64 << 20};
  // Doubling from one piece would end at 4 pieces' room for 3 and a bit.
  const int64_t total = 3 * state_piece_bytes + 1;
  actors::state_uploads::key k{7, 1};
  for (int64_t at = 0; at < total; at += state_piece_bytes)
    REQUIRE(up.append(k, total, at, bytes_of(std::min(state_piece_bytes, total - at))).empty());
  std::string why;
  auto got = up.take(k, why);
  REQUIRE(got);
  CHECK(got->size() == static_cast<size_t>(total));
  CHECK(got->capacity() < static_cast<size_t>(total + state_piece_bytes / 2));
  CHECK(up.reserved() == 0);
}

TEST_CASE("state_uploads: announcements alone reserve no more than the budget") {
  actors::state_uploads up{1000, 3};
  CHECK(up.append({1, 1}, 900, 0, "x").empty());
  CHECK(up.reserved() == 900);
  // Admitted (arrived bytes are what the budget bounds) but not reserved:
  // it grows as its pieces arrive.
  CHECK(up.append({1, 2}, 900, 0, "x").empty());
  CHECK(up.reserved() == 900);
  // A refused piece drops its upload and its reservation; the next
  // announcement may reserve again.
  CHECK_THAT(up.append({1, 1}, 900, 5, "x"), Catch::Contains("where 1 bytes"));
  CHECK(up.reserved() == 0);
  CHECK(up.append({1, 3}, 100, 0, "x").empty());
  CHECK(up.reserved() == 100);
  up.clear();
  CHECK(up.reserved() == 0);
}

TEST_CASE("state_uploads: out-of-order, oversized and overlong pieces drop the upload") {
  actors::state_uploads up{64 << 20};
  actors::state_uploads::key k{7, 2};
  CHECK(up.append(k, 100, 0, bytes_of(40)).empty());
  CHECK_THAT(up.append(k, 100, 50, bytes_of(10)), Catch::Contains("where 40 bytes"));
  CHECK(up.count() == 0); // dropped: the sender starts again
  CHECK_THAT(up.append(k, 100, 40, bytes_of(10)), Catch::Contains("not open"));
  CHECK(up.append(k, 100, 0, bytes_of(40)).empty());
  CHECK_THAT(up.append(k, 100, 40, bytes_of(61)), Catch::Contains("past the upload"));
  CHECK(up.count() == 0);
  CHECK(up.append(k, 100, 0, bytes_of(40)).empty());
  CHECK_THAT(up.append(k, 90, 40, bytes_of(10)), Catch::Contains("upload of 100"));
  CHECK_THAT(up.append(k, 100, 0, bytes_of(state_piece_bytes + 1)),
             Catch::Contains("a piece of"));
  CHECK_THAT(up.append(k, 100, 0, std::string{}), Catch::Contains("a piece of 0"));
  CHECK_THAT(up.append(k, -5, 0, "x"), Catch::Contains("an upload of -5"));
  CHECK(up.bytes() == 0);
}

TEST_CASE("state_uploads: what a peer can make a node hold is bounded") {
  // Announcing more than the budget is refused before any of it is sent.
  actors::state_uploads up{1000, 3};
  CHECK_THAT(up.append({1, 1}, 2000, 0, "x"),
             Catch::Contains("a stage state of 2.0 KiB: more than its memory budget of "
                             "1000 B leaves (0 B held"));
  // Two announcements that fit alone but not together: the bytes that
  // arrive are what counts, and they stop at the budget.
  CHECK(up.append({1, 2}, 900, 0, bytes_of(600)).empty());
  CHECK(up.append({1, 3}, 300, 0, bytes_of(300)).empty());
  CHECK_THAT(up.append({1, 2}, 900, 600, bytes_of(200)), Catch::Contains("past the node's"));
  CHECK(up.bytes() == 300); // the refused upload is dropped, its bytes freed
  // At most 3 open at once: the oldest makes room.
  CHECK(up.append({2, 1}, 10, 0, "a").empty());
  CHECK(up.append({2, 2}, 10, 0, "b").empty());
  CHECK(up.append({2, 3}, 10, 0, "c").empty());
  CHECK(up.count() == 3);
  std::string why;
  CHECK_FALSE(up.take({1, 3}, why)); // the oldest, evicted
  // Senders are told apart: the same number from another sender is another upload.
  CHECK(up.append({3, 3}, 1, 0, "z").empty());
  CHECK_FALSE(up.take({2, 3}, why)); // incomplete (1 of 10)
  CHECK(up.take({3, 3}, why) == std::string("z"));
  up.clear();
  CHECK((up.count() == 0 && up.bytes() == 0));
}

TEST_CASE("read_in_pieces: pieces add up to the state, or the read fails naming why") {
  const auto state = bytes_of(2 * state_piece_bytes + 3, 's');
  int asked = 0;
  auto whole = actors::read_in_pieces(
    [&](int64_t offset) {
      ++asked;
      auto [piece, last] = actors::piece_at(state, offset);
      CHECK(last == (offset + static_cast<int64_t>(piece.size())
                     == static_cast<int64_t>(state.size())));
      return std::make_pair(piece, static_cast<int64_t>(state.size()));
    },
    "test");
  CHECK(whole == state);
  CHECK(asked == 3);
  CHECK(actors::read_in_pieces([](int64_t) { return std::make_pair(std::string{}, int64_t{0}); },
                               "test")
          .empty());
  CHECK_THROWS_WITH(actors::read_in_pieces(
                      [](int64_t offset) {
                        return std::make_pair(std::string("ab"), offset == 0 ? int64_t{4}
                                                                             : int64_t{5});
                      },
                      "reading X"),
                    Catch::Contains("reading X: 2 bytes came at offset 2 of a state of 5"));
  CHECK_THROWS_WITH(actors::read_in_pieces(
                      [](int64_t) { return std::make_pair(std::string(), int64_t{4}); },
                      "reading Y"),
                    Catch::Contains("reading Y: 0 bytes came at offset 0"));
  CHECK(actors::piece_at(state, -1).first.empty());
  CHECK(actors::piece_at(state, static_cast<int64_t>(state.size())).second);
}
