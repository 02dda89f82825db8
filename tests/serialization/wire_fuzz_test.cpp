#include "asteroid/serialization/tensor_wire.hpp"
#include "asteroid/serialization/wire_error.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <cstring>
#include <random>

using namespace asteroid::serialization;

namespace {

std::vector<std::string> seed_encodings() {
  torch::manual_seed(7);
  std::vector<std::string> out;
  out.push_back(encode_tensor(torch::randn({3, 4})));
  out.push_back(encode_tensor(torch::tensor(2.5, torch::kFloat64)));
  out.push_back(encode_tensor(torch::empty({0, 3}, torch::kInt64)));
  out.push_back(encode_tensor(torch::randint(0, 2, {7}).to(torch::kBool)));
  out.push_back(encode_tensor(torch::randn({2, 1, 3}, torch::kBFloat16)));
  out.push_back(encode_tensor(torch::randint(-5, 5, {5}, torch::kInt8)));
  out.push_back(encode_tensors({{"a", torch::ones({2}, torch::kFloat16)},
                                {"bias", torch::arange(3, torch::kInt32)}}));
  return out;
}

enum class outcome { decoded, rejected };

// Any exception other than wire_error fails the test (and a crash fails it
// loudly). A successful decode must re-encode to the very same bytes: the
// format has exactly one encoding per value, so anything else means the
// decoder accepted something it misread.
outcome check_one(const std::string& bytes) {
  bool is_list = bytes.size() >= 4 && bytes.compare(0, 4, "ASTL") == 0;
  try {
    if (is_list) {
      auto back = decode_tensors(bytes);
      if (encode_tensors(back) != bytes)
        FAIL("list decoded but does not re-encode identically");
    } else {
      auto back = decode_tensor(bytes);
      if (encode_tensor(back) != bytes)
        FAIL("tensor decoded but does not re-encode identically");
    }
    return outcome::decoded;
  } catch (const wire_error&) {
    return outcome::rejected;
  }
}

} // namespace

TEST_CASE("fuzzed bytes either decode or throw wire_error", "[tensor_wire][fuzz]") {
  auto seeds = seed_encodings();
  std::mt19937_64 rng(20240531);
  auto pick = [&](std::size_t n) { return std::uniform_int_distribution<std::size_t>(0, n - 1)(rng); };
  auto byte = [&] { return static_cast<char>(rng() & 0xff); };

  constexpr int cases = 20000;
  int decoded = 0, rejected = 0;
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < cases; ++i) {
    std::string s;
    switch (i % 7) {
    case 0: { // pure noise, sometimes behind a valid magic + version
      s.resize(pick(80));
      for (auto& c : s)
        c = byte();
      if (rng() & 1) {
        std::string prefix = (rng() & 1) ? std::string("ASTT\x01\x00", 6)
                                         : std::string("ASTL\x01\x00", 6);
        s = prefix + s;
      }
      break;
    }
    case 1: { // truncation
      s = seeds[pick(seeds.size())];
      s.resize(pick(s.size() + 1));
      break;
    }
    case 2: { // a few random byte flips
      s = seeds[pick(seeds.size())];
      for (int k = 0, n = 1 + static_cast<int>(pick(4)); k < n; ++k)
        s[pick(s.size())] ^= static_cast<char>(1 + pick(255));
      break;
    }
    case 3: { // header byte set to an extreme value
      s = seeds[pick(seeds.size())];
      s[pick(std::min<std::size_t>(s.size(), 40))] = (rng() & 1) ? '\xff' : '\x00';
      break;
    }
    case 4: { // a random 8-byte field overwritten (dims, sizes, counts)
      s = seeds[pick(seeds.size())];
      if (s.size() >= 16) {
        std::int64_t v = (rng() & 1) ? static_cast<std::int64_t>(rng())
                                     : static_cast<std::int64_t>(pick(64)) - 8;
        std::memcpy(s.data() + pick(s.size() - 7), &v, 8);
      }
      break;
    }
    case 5: { // insert or delete a chunk
      s = seeds[pick(seeds.size())];
      auto at = pick(s.size() + 1);
      if (rng() & 1) {
        std::string chunk(1 + pick(16), '\0');
        for (auto& c : chunk)
          c = byte();
        s.insert(at, chunk);
      } else if (at < s.size()) {
        s.erase(at, 1 + pick(16));
      }
      break;
    }
    default: // unchanged or with trailing garbage
      s = seeds[pick(seeds.size())];
      if (rng() & 1)
        s.push_back(byte());
      break;
    }
    (check_one(s) == outcome::decoded ? decoded : rejected) += 1;
  }
  auto elapsed = std::chrono::steady_clock::now() - start;
  INFO("decoded " << decoded << ", rejected " << rejected);
  // Both outcomes must really occur, or the fuzzer is not exercising anything.
  CHECK(decoded > 1000);
  CHECK(rejected > 10000);
  CHECK(elapsed < std::chrono::seconds(20));
}
