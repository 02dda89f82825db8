#include "asteroid/serialization/tensor_wire.hpp"
#include "asteroid/serialization/wire_error.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>

using namespace asteroid::serialization;

namespace {

// Bit-level equality: NaN payloads and -0.0 must survive too.
bool same_bits(const torch::Tensor& a, const torch::Tensor& b) {
  if (a.scalar_type() != b.scalar_type() || a.sizes() != b.sizes())
    return false;
  auto ca = a.contiguous();
  auto cb = b.contiguous();
  return ca.nbytes() == cb.nbytes()
         && std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.nbytes()) == 0;
}

torch::Tensor sample(torch::Dtype dtype, at::IntArrayRef shape) {
  if (dtype == torch::kBool)
    return torch::rand(shape) > 0.5;
  if (torch::isFloatingType(dtype) || torch::isComplexType(dtype))
    return torch::randn(shape, torch::TensorOptions().dtype(dtype));
  return torch::randint(-100, 100, shape).to(dtype);
}

std::string header_bytes(std::uint16_t version, std::uint8_t code, std::vector<std::int64_t> dims,
                         std::uint64_t nbytes) {
  std::string s = "ASTT";
  s.append(reinterpret_cast<const char*>(&version), 2);
  s.push_back(static_cast<char>(code));
  s.push_back(static_cast<char>(dims.size()));
  for (auto d : dims)
    s.append(reinterpret_cast<const char*>(&d), 8);
  s.append(reinterpret_cast<const char*>(&nbytes), 8);
  return s;
}

std::string message_of(std::string_view bytes) {
  try {
    decode_tensor(bytes);
  } catch (const wire_error& e) {
    return e.what();
  }
  return "<no error>";
}

} // namespace

TEST_CASE("every model dtype round-trips bit-exactly", "[tensor_wire]") {
  torch::manual_seed(1);
  for (auto dtype : {torch::kFloat32, torch::kFloat64, torch::kFloat16, torch::kBFloat16,
                     torch::kInt64, torch::kInt32, torch::kInt16, torch::kInt8, torch::kUInt8,
                     torch::kBool, torch::kComplexFloat, torch::kComplexDouble}) {
    CAPTURE(c10::toString(dtype));
    auto t = sample(dtype, {3, 4, 5});
    auto bytes = encode_tensor(t);
    CHECK(bytes.size() == encoded_size(t));
    auto back = decode_tensor(bytes);
    CHECK(back.device().is_cpu());
    CHECK(back.is_contiguous());
    CHECK(same_bits(t, back));
  }
}

TEST_CASE("special float values survive bit for bit", "[tensor_wire]") {
  std::vector<float> f{std::numeric_limits<float>::quiet_NaN(),
                       -std::numeric_limits<float>::quiet_NaN(),
                       std::numeric_limits<float>::infinity(),
                       -std::numeric_limits<float>::infinity(),
                       std::numeric_limits<float>::denorm_min(),
                       1e-40f,
                       -0.0f,
                       std::numeric_limits<float>::max()};
  // A NaN with a custom payload: must not be canonicalised.
  std::uint32_t payload = 0x7fc12345;
  float nan_payload;
  std::memcpy(&nan_payload, &payload, 4);
  f.push_back(nan_payload);
  auto t = torch::from_blob(f.data(), {static_cast<int64_t>(f.size())}, torch::kFloat32).clone();
  auto back = decode_tensor(encode_tensor(t));
  REQUIRE(same_bits(t, back));
  std::uint32_t got;
  std::memcpy(&got, static_cast<const char*>(back.data_ptr()) + 4 * (f.size() - 1), 4);
  CHECK(got == payload);

  auto d = t.to(torch::kFloat64);
  d[4] = std::numeric_limits<double>::denorm_min();
  CHECK(same_bits(d, decode_tensor(encode_tensor(d))));
  auto h = t.to(torch::kFloat16);
  CHECK(same_bits(h, decode_tensor(encode_tensor(h))));
}

TEST_CASE("non-contiguous inputs encode their logical values", "[tensor_wire]") {
  torch::manual_seed(2);
  auto base = torch::randn({6, 8});
  SECTION("transposed") {
    auto t = base.t();
    REQUIRE_FALSE(t.is_contiguous());
    auto back = decode_tensor(encode_tensor(t));
    CHECK(back.sizes() == t.sizes());
    CHECK(torch::equal(back, t));
  }
  SECTION("strided slice") {
    auto t = base.slice(1, 1, 7, 2);
    REQUIRE_FALSE(t.is_contiguous());
    CHECK(torch::equal(decode_tensor(encode_tensor(t)), t));
  }
  SECTION("expanded (stride 0)") {
    auto t = torch::arange(4).expand({3, 4});
    CHECK(torch::equal(decode_tensor(encode_tensor(t)), t));
  }
  SECTION("conjugate view") {
    auto c = torch::randn({4}, torch::kComplexFloat);
    auto t = c.conj();
    REQUIRE(t.is_conj());
    CHECK(torch::equal(decode_tensor(encode_tensor(t)), t.resolve_conj()));
  }
  SECTION("requires_grad tensor") {
    auto t = base.clone().requires_grad_(true);
    CHECK(torch::equal(decode_tensor(encode_tensor(t)), base));
  }
}

TEST_CASE("0-dim and empty tensors round-trip", "[tensor_wire]") {
  auto scalar = torch::tensor(3.5);
  auto back = decode_tensor(encode_tensor(scalar));
  CHECK(back.dim() == 0);
  CHECK(back.item<double>() == 3.5);

  for (auto shape : {std::vector<int64_t>{0}, std::vector<int64_t>{3, 0, 2},
                     std::vector<int64_t>{0, 0}}) {
    auto e = torch::empty(shape, torch::kInt32);
    auto b = decode_tensor(encode_tensor(e));
    CHECK(b.sizes() == e.sizes());
    CHECK(b.scalar_type() == torch::kInt32);
    CHECK(b.numel() == 0);
  }
  auto b = decode_tensor(encode_tensor(torch::ones({1, 1, 1, 1}, torch::kUInt8)));
  CHECK(b.sizes() == at::IntArrayRef({1, 1, 1, 1}));
}

TEST_CASE("header layout matches the documented format", "[tensor_wire]") {
  auto t = torch::tensor({1.0f, 2.0f});
  auto bytes = encode_tensor(t);
  float payload[2] = {1.0f, 2.0f};
  std::string expected = header_bytes(1, 1, {2}, 8);
  expected.append(reinterpret_cast<const char*>(payload), 8);
  CHECK(bytes == expected);
}

TEST_CASE("append and read walk several records in one buffer", "[tensor_wire]") {
  std::string buf = "prefix";
  auto a = torch::arange(10, torch::kInt64);
  auto b = torch::randn({2, 3}, torch::kFloat64);
  append_tensor(buf, a);
  append_tensor(buf, b);
  std::size_t offset = 6;
  CHECK(torch::equal(read_tensor(buf, offset), a));
  CHECK(torch::equal(read_tensor(buf, offset), b));
  CHECK(offset == buf.size());
  CHECK(buf.compare(0, 6, "prefix") == 0);
}

TEST_CASE("decode_tensor_into writes into an existing tensor", "[tensor_wire]") {
  auto src = torch::randn({3, 4});
  auto bytes = encode_tensor(src);
  auto dst = torch::zeros({3, 4});
  auto* storage = dst.data_ptr();
  decode_tensor_into(bytes, dst);
  CHECK(dst.data_ptr() == storage);
  CHECK(torch::equal(dst, src));

  auto wide = torch::zeros({4, 3});
  auto strided = wide.t(); // [3, 4], non-contiguous
  decode_tensor_into(bytes, strided);
  CHECK(torch::equal(wide.t(), src));

  auto wrong = torch::zeros({4, 3});
  CHECK_THROWS_WITH(decode_tensor_into(bytes, wrong),
                    "received [3, 4] Float but the destination is [4, 3] Float");
  CHECK(torch::equal(wrong, torch::zeros({4, 3})));
  auto wrong_type = torch::zeros({3, 4}, torch::kFloat64);
  CHECK_THROWS_WITH(decode_tensor_into(bytes, wrong_type),
                    "received [3, 4] Float but the destination is [3, 4] Double");
  auto other = encode_tensor(torch::ones({3, 4})) + "!";
  CHECK_THROWS_WITH(decode_tensor_into(other, dst),
                    "trailing garbage: 1 bytes after the record at offset 80");
  CHECK(torch::equal(dst, src)); // untouched by the failed decode
}

TEST_CASE("named tensor lists round-trip in order", "[tensor_wire]") {
  named_tensors in{{"fc1.weight", torch::randn({4, 3})},
                   {"fc1.bias", torch::zeros({4}, torch::kFloat16)},
                   {"", torch::tensor(7, torch::kInt64)},
                   {"mask", torch::tensor({true, false, true})},
                   {"fc1.weight", torch::empty({0, 5})}};
  auto out = decode_tensors(encode_tensors(in));
  REQUIRE(out.size() == in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    CHECK(out[i].first == in[i].first);
    CHECK(same_bits(out[i].second, in[i].second));
  }
  CHECK(decode_tensors(encode_tensors({})).empty());

  std::string buf;
  append_tensors(buf, in);
  append_tensor(buf, torch::ones({2}));
  std::size_t offset = 0;
  CHECK(read_tensors(buf, offset).size() == in.size());
  CHECK(torch::equal(read_tensor(buf, offset), torch::ones({2})));
  CHECK(offset == buf.size());
}

TEST_CASE("malformed input names the problem", "[tensor_wire][errors]") {
  auto good = encode_tensor(torch::arange(6, torch::kFloat32).reshape({2, 3}));

  CHECK(message_of("") == "truncated: need 4 bytes, have 0 (tensor magic at offset 0)");
  CHECK(message_of(std::string_view(good).substr(0, 10))
        == "truncated: need 16 bytes, have 2 (shape at offset 8)");
  CHECK(message_of(std::string_view(good).substr(0, good.size() - 1))
        == "truncated: need 24 bytes, have 23 (tensor payload at offset 32)");

  auto bad_magic = good;
  bad_magic[0] = 'X';
  CHECK_THAT(message_of(bad_magic), Catch::StartsWith("bad magic: expected 'ASTT'"));

  CHECK(message_of(header_bytes(9, 1, {2}, 8))
        == "unsupported version 9 (this build reads version 1)");
  CHECK(message_of(header_bytes(1, 77, {2}, 8)) == "unknown dtype code 77");
  CHECK(message_of(header_bytes(1, 0, {2}, 8)) == "unknown dtype code 0");
  CHECK(message_of(header_bytes(1, 1, {std::int64_t{1} << 20, std::int64_t{1} << 20}, 0))
        == "absurd shape [1048576, 1048576]: 2^40 elements, limit is below 2^40");
  CHECK_THAT(message_of(header_bytes(1, 1, {std::int64_t{1} << 62, 0, 8}, 0)),
             Catch::StartsWith("absurd shape [4611686018427387904, 0, 8]: more than 2^64"));
  CHECK_THAT(message_of(header_bytes(1, 1, {3, 1000000000000}, 0)),
             Catch::StartsWith("absurd shape [3, 1000000000000]: 3000000000000 (over 2^41)"));
  CHECK(message_of(header_bytes(1, 1, {2, -3}, 24)) == "negative dimension -3 in shape");
  CHECK(message_of(header_bytes(1, 1, std::vector<std::int64_t>(17, 1), 4))
        == "too many dimensions: 17 (max 16)");
  CHECK(message_of(header_bytes(1, 1, {2}, 12))
        == "inconsistent payload size: header says 12 bytes, shape [2] of Float needs 8");
  // A big but plausible shape with no payload: refused before allocating.
  CHECK(message_of(header_bytes(1, 2, {1 << 30}, std::uint64_t{8} << 30))
        == "truncated: need 8589934592 bytes, have 0 (tensor payload at offset 24)");

  auto bad_bool = header_bytes(1, 10, {3}, 3) + std::string("\x01\x00\x02", 3);
  CHECK(message_of(bad_bool) == "invalid bool value 2 at element 2");

  CHECK(message_of(good + "xy") == "trailing garbage: 2 bytes after the record at offset 56");

  std::string list = encode_tensors({{"w", torch::ones({2})}});
  CHECK_THROWS_WITH(decode_tensor(list), Catch::StartsWith("bad magic: expected 'ASTT'"));
  CHECK_THROWS_WITH(decode_tensors(good), Catch::StartsWith("bad magic: expected 'ASTL'"));
  auto absurd_count = list;
  std::uint32_t count = 1000000;
  std::memcpy(absurd_count.data() + 6, &count, 4);
  CHECK_THROWS_WITH(decode_tensors(absurd_count),
                    Catch::StartsWith("absurd tensor count 1000000 for"));
  auto long_name = list;
  std::uint32_t len = 5000;
  std::memcpy(long_name.data() + 10, &len, 4);
  CHECK_THROWS_WITH(decode_tensors(long_name),
                    "tensor name of 5000 bytes (max 4096) in entry 0");
}

TEST_CASE("unencodable tensors are refused", "[tensor_wire][errors]") {
  CHECK_THROWS_AS(encode_tensor(torch::Tensor()), wire_error);
  CHECK_THROWS_WITH(encode_tensor(torch::quantize_per_tensor(torch::ones({2}), 0.1, 0, torch::kQInt8)),
                    Catch::StartsWith("unsupported dtype"));
  CHECK_THROWS_WITH(encode_tensor(torch::ones(std::vector<int64_t>(17, 1))),
                    "cannot encode a tensor with 17 dimensions (max 16)");
}
