#include "asteroid/serialization/frame.hpp"

#include <catch2/catch.hpp>

#include <cstring>

using namespace asteroid::serialization;

TEST_CASE("frame headers round-trip every field", "[frame]") {
  frame_header h;
  h.kind = frame_kind::gradient;
  h.destination = 0x0123456789abcdefULL;
  h.step = -42;
  h.a = 7;
  h.b = -3;
  h.key_size = 11;
  h.payload_size = (std::uint64_t{1} << 20) + 5;
  auto bytes = encode_frame_header(h);
  auto back = decode_frame_header(bytes.data());
  CHECK(back.kind == h.kind);
  CHECK(back.destination == h.destination);
  CHECK(back.step == h.step);
  CHECK(back.a == h.a);
  CHECK(back.b == h.b);
  CHECK(back.key_size == h.key_size);
  CHECK(back.payload_size == h.payload_size);
}

TEST_CASE("bad frame headers name their problem", "[frame]") {
  frame_header h;
  h.payload_size = 100;
  h.key_size = 10;
  auto good = encode_frame_header(h);
  auto expect = [](std::array<char, frame_header_size> b, frame_limits l,
                   const std::string& what) {
    REQUIRE_THROWS_AS(decode_frame_header(b.data(), l), wire_error);
    try {
      decode_frame_header(b.data(), l);
    } catch (const wire_error& e) {
      CHECK_THAT(e.what(), Catch::Contains(what));
    }
  };
  auto b = good;
  b[0] = 'X';
  expect(b, {}, "bad magic");
  b = good;
  b[4] = 9;
  expect(b, {}, "unsupported version 9");
  b = good;
  b[5] = 0;
  expect(b, {}, "unknown kind 0");
  b[5] = 7;
  expect(b, {}, "unknown kind 7");
  frame_limits tight;
  tight.max_payload = 99;
  expect(good, tight, "payload of 100 bytes exceeds the limit of 99");
  tight = {};
  tight.max_key = 9;
  expect(good, tight, "key of 10 bytes exceeds the limit of 9");
  CHECK_NOTHROW(decode_frame_header(good.data()));
}
