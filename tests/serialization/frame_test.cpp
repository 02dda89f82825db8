#include "asteroid/serialization/frame.hpp"

#include <catch2/catch.hpp>

#include <cstring>

using namespace asteroid::serialization;

TEST_CASE("frame headers round-trip every field of a tensor message", "[frame]") {
  tensor_message m;
  m.kind = tensor_kind::gradient;
  m.job = 0x7edcba9876543210LL;
  m.generation = 3;
  m.step = -42;
  m.micro_batch = 7;
  m.piece = 5;
  m.sender = -3;
  m.key = "L0-3";
  m.payload = std::string((1 << 20) + 5, 'p');
  auto h = frame_header_of(m, 0x0123456789abcdefULL);
  h.link = 0xfedcba9876543210ULL;
  h.sequence = 0x1122334455667788ULL;
  CHECK(h.key_size == 4);
  CHECK(h.payload_size == m.payload.size());
  auto bytes = encode_frame_header(h);
  auto back = decode_frame_header(bytes.data());
  CHECK(back.destination == 0x0123456789abcdefULL);
  CHECK(back.type == frame_type::tensor);
  CHECK(back.link == h.link);
  CHECK(back.sequence == h.sequence);
  auto got = message_of(back, m.key, m.payload);
  CHECK(got.kind == m.kind);
  CHECK(got.job == m.job);
  CHECK(got.generation == m.generation);
  CHECK(got.step == m.step);
  CHECK(got.micro_batch == m.micro_batch);
  CHECK(got.piece == m.piece);
  CHECK(got.sender == m.sender);
  CHECK(back.key_size == h.key_size);
  CHECK(back.payload_size == h.payload_size);
}

TEST_CASE("every tensor kind has a name and survives a frame", "[frame]") {
  for (std::uint8_t k = 1; k <= max_tensor_kind; ++k) {
    tensor_message m;
    m.kind = static_cast<tensor_kind>(k);
    CHECK(to_string(m.kind).find("kind") == std::string::npos);
    auto bytes = encode_frame_header(frame_header_of(m, 1));
    CHECK(decode_frame_header(bytes.data()).kind == m.kind);
  }
  CHECK(to_string(static_cast<tensor_kind>(200)) == "kind 200");
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
  b[4] = 1; // the first format, before tensor messages
  expect(b, {}, "unsupported version 1");
  b[4] = 2; // the format before frames named their job
  expect(b, {}, "unsupported version 2");
  b[4] = 3; // the format before links and sequence numbers
  expect(b, {}, "unsupported version 3");
  b = good;
  b[6] = 2;
  expect(b, {}, "unknown frame type 2");
  b = good;
  b[5] = 0;
  expect(b, {}, "unknown kind 0");
  b[5] = 9;
  expect(b, {}, "unknown kind 9");
  frame_limits tight;
  tight.max_payload = 99;
  expect(good, tight, "payload of 100 bytes exceeds the limit of 99");
  tight = {};
  tight.max_key = 9;
  expect(good, tight, "key of 10 bytes exceeds the limit of 9");
  CHECK_NOTHROW(decode_frame_header(good.data()));
  // An acknowledgement carries nothing but its link and sequence number.
  auto ack = encode_frame_header(acknowledgement_header(7, 9));
  b = ack;
  b[5] = 1;
  expect(b, {}, "an acknowledgement with a kind, key or payload");
  auto with_payload = acknowledgement_header(7, 9);
  with_payload.payload_size = 1;
  expect(encode_frame_header(with_payload), {},
         "an acknowledgement with a kind, key or payload");
}

TEST_CASE("acknowledgements round-trip their link and sequence number", "[frame]") {
  auto back = decode_frame_header(encode_frame_header(acknowledgement_header(42, 1u << 31)).data());
  CHECK(back.type == frame_type::acknowledgement);
  CHECK(back.link == 42);
  CHECK(back.sequence == (1u << 31));
  CHECK(back.key_size == 0);
  CHECK(back.payload_size == 0);
}
