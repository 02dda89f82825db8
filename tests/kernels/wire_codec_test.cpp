#include "asteroid/kernels/wire_codec.hpp"

#include <catch2/catch.hpp>

using namespace asteroid::kernels;

TEST_CASE("wire codecs: none is bit-exact, fp16 and bf16 keep their precision",
          "[wire_codec]") {
  torch::manual_seed(5);
  auto x = torch::randn({8, 16, 3, 3});
  auto none = encode(x, wire_codec::none);
  CHECK(none.values.scalar_type() == torch::kFloat32);
  CHECK(torch::equal(decode(none, wire_codec::none), x));
  auto half = encode(x, wire_codec::fp16);
  CHECK(half.values.scalar_type() == torch::kFloat16);
  CHECK(half.values.nbytes() * 2 == x.nbytes());
  auto back = decode(half, wire_codec::fp16);
  CHECK(back.scalar_type() == torch::kFloat32);
  // fp16 keeps 11 significant bits, bf16 8: relative error at most half a unit.
  CHECK(((back - x).abs() <= x.abs() * std::ldexp(1.0, -11) + 1e-7).all().item<bool>());
  auto brain = decode(encode(x, wire_codec::bf16), wire_codec::bf16);
  CHECK(((brain - x).abs() <= x.abs() * std::ldexp(1.0, -8) + 1e-30).all().item<bool>());
  CHECK_FALSE(torch::equal(brain, x));
}

TEST_CASE("wire codecs: int8 with one scale per tensor or per channel",
          "[wire_codec]") {
  torch::manual_seed(6);
  // Channel 0 is 100 times larger than the others.
  auto x = torch::randn({4, 3, 5});
  x.select(1, 0).mul_(100.0);
  auto tensor = encode(x, wire_codec::int8);
  CHECK(tensor.values.scalar_type() == torch::kInt8);
  REQUIRE(tensor.scale.numel() == 1);
  auto per_tensor = decode(tensor, wire_codec::int8);
  CHECK(((per_tensor - x).abs() <= tensor.scale.item<float>() / 2 + 1e-6).all().item<bool>());
  auto channel = encode(x, wire_codec::int8_channel);
  REQUIRE(channel.scale.numel() == 3);
  auto per_channel = decode(channel, wire_codec::int8_channel);
  for (int c = 0; c < 3; ++c) {
    auto err = (per_channel.select(1, c) - x.select(1, c)).abs().max().item<float>();
    CHECK(err <= channel.scale[c].item<float>() / 2 + 1e-6);
  }
  // The small channels lose far less with their own scales.
  auto small = [&](const torch::Tensor& y) {
    return (y.slice(1, 1, 3) - x.slice(1, 1, 3)).abs().max().item<float>();
  };
  CHECK(small(per_channel) * 20 < small(per_tensor));
  // All zeros: scale 1, exact zeros back.
  auto zeros = torch::zeros({2, 2});
  CHECK(torch::equal(decode(encode(zeros, wire_codec::int8_channel), wire_codec::int8_channel),
                     zeros));
}

TEST_CASE("wire codecs: decode refuses what the codec cannot have sent, names "
          "are checked", "[wire_codec]") {
  auto x = torch::randn({2, 3});
  auto e = encode(x, wire_codec::fp16);
  CHECK_THROWS_WITH(decode(e, wire_codec::bf16), Catch::Contains("expected BFloat16"));
  auto q = encode(x, wire_codec::int8_channel);
  q.scale = torch::ones({5});
  CHECK_THROWS_WITH(decode(q, wire_codec::int8_channel),
                    Catch::Contains("5 scales do not fit"));
  q.scale = torch::Tensor();
  CHECK_THROWS_WITH(decode(q, wire_codec::int8_channel), Catch::Contains("1-D float32 scale"));
  CHECK_THROWS_AS(encode(torch::ones({2}, torch::kLong), wire_codec::fp16),
                  std::invalid_argument);
  CHECK(parse_wire_codec("int8-channel") == wire_codec::int8_channel);
  CHECK_THROWS_WITH(parse_wire_codec("fp8"),
                    Catch::Contains("unknown wire codec 'fp8'") && Catch::Contains("bf16"));
  CHECK(wire_ratio(wire_codec::fp16) == 0.5);
}

TEST_CASE("wire codecs: error feedback carries what fp16 loses into the next "
          "tensor, so sums over steps stay right", "[wire_codec]") {
  // 1 + 1e-4 rounds to 1 in fp16 (its spacing near 1 is 2^-10): sent 100
  // times without feedback the sum is off by 0.01; with feedback the
  // residual makes up for it.
  auto x = torch::full({4}, 1.0f + 1e-4f);
  auto plain = torch::zeros({4});
  auto fed = torch::zeros({4});
  error_feedback ef{wire_codec::fp16};
  for (int step = 0; step < 100; ++step) {
    plain += decode(encode(x, wire_codec::fp16), wire_codec::fp16);
    fed += decode(ef.encode(7, x), wire_codec::fp16);
  }
  auto truth = x * 100;
  CHECK((plain - truth).abs().max().item<float>() > 5e-3);
  CHECK((fed - truth).abs().max().item<float>() < 2e-3);
  CHECK(ef.size() == 1);
}
