#include "asteroid/serialization/checkpoint.hpp"

#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

using namespace asteroid::serialization;
namespace fs = std::filesystem;

namespace {

std::string tmp_path(const std::string& name) {
  return std::string(ASTEROID_TEST_TMP) + "/" + name;
}

checkpoint sample_checkpoint() {
  torch::manual_seed(5);
  checkpoint c;
  c.model_state = {{"fc.weight", torch::randn({4, 3})}, {"fc.bias", torch::randn({4})}};
  c.optimizer.kind = "adam";
  c.optimizer.tensors = {{"param.0.step", torch::tensor(17, torch::kInt64)},
                         {"param.0.exp_avg", torch::randn({4, 3})}};
  c.optimizer.hyper_params = {{"group.0.lr", 1e-3}, {"group.0.beta1", 0.9}};
  c.step = 1234;
  c.epoch = 3;
  c.data_position = 4096;
  c.rng_state = std::string("\x00\x01\xff rng", 7);
  c.model_name = "resnet18";
  c.model_options_json = R"({"num_classes": 10})";
  c.metadata = "written by checkpoint_test";
  return c;
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(),
                                                                 static_cast<std::streamsize>(bytes.size()));
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string load_error(const std::string& path) {
  try {
    load_checkpoint(path);
  } catch (const checkpoint_error& e) {
    return e.what();
  }
  return "<no error>";
}

} // namespace

TEST_CASE("a checkpoint round-trips every field", "[checkpoint]") {
  auto path = tmp_path("roundtrip.ckpt");
  auto c = sample_checkpoint();
  save_checkpoint(path, c);
  auto d = load_checkpoint(path);
  CHECK(d.step == 1234);
  CHECK(d.epoch == 3);
  CHECK(d.data_position == 4096);
  CHECK(d.rng_state == c.rng_state);
  CHECK(d.model_name == "resnet18");
  CHECK(d.model_options_json == c.model_options_json);
  CHECK(d.metadata == c.metadata);
  REQUIRE(d.model_state.size() == 2);
  for (std::size_t i = 0; i < 2; ++i) {
    CHECK(d.model_state[i].first == c.model_state[i].first);
    CHECK(torch::equal(d.model_state[i].second, c.model_state[i].second));
  }
  CHECK(d.optimizer.kind == "adam");
  REQUIRE(d.optimizer.tensors.size() == 2);
  CHECK(d.optimizer.tensors[0].second.item<int64_t>() == 17);
  CHECK(torch::equal(d.optimizer.tensors[1].second, c.optimizer.tensors[1].second));
  CHECK(d.optimizer.hyper_params == c.optimizer.hyper_params);
  CHECK(encode_checkpoint(d) == read_bytes(path));
}

TEST_CASE("saving replaces the old checkpoint atomically", "[checkpoint]") {
  auto path = tmp_path("atomic.ckpt");
  auto c = sample_checkpoint();
  save_checkpoint(path, c);
  c.step = 2000;
  save_checkpoint(path, c);
  CHECK(load_checkpoint(path).step == 2000);

  // A save that fails midway (here: unencodable tensor) keeps the old file.
  auto bad = c;
  bad.step = 3000;
  bad.model_state.emplace_back("broken", torch::Tensor());
  CHECK_THROWS_WITH(save_checkpoint(path, bad),
                    "checkpoint '" + path + "': cannot encode: cannot encode an undefined tensor");
  CHECK(load_checkpoint(path).step == 2000);
  for (const auto& entry : fs::directory_iterator(ASTEROID_TEST_TMP))
    CHECK(entry.path().filename().string().find("atomic.ckpt.tmp") == std::string::npos);

  auto nowhere = tmp_path("no/such/dir/x.ckpt");
  CHECK_THROWS_WITH(save_checkpoint(nowhere, c),
                    Catch::StartsWith("checkpoint '" + nowhere + "': cannot create"));
}

TEST_CASE("bad checkpoint files name the file and the problem", "[checkpoint][errors]") {
  auto good = encode_checkpoint(sample_checkpoint());
  auto path = tmp_path("bad.ckpt");
  auto prefix = "checkpoint '" + path + "': ";

  auto missing = tmp_path("does-not-exist.ckpt");
  fs::remove(missing);
  CHECK(load_error(missing) == "checkpoint '" + missing + "': missing (no such file)");

  write_file(path, "");
  CHECK(load_error(path) == prefix + "truncated: need 24 bytes, have 0");
  write_file(path, good.substr(0, 10));
  CHECK(load_error(path) == prefix + "truncated: need 24 bytes, have 10");
  write_file(path, good.substr(0, good.size() - 100));
  CHECK(load_error(path) == prefix + "truncated: need " + std::to_string(good.size())
                              + " bytes, have " + std::to_string(good.size() - 100));

  write_file(path, "PK\x03\x04 this is a zip file, not a checkpoint");
  CHECK(load_error(path) == prefix + "bad magic (not an Asteroid checkpoint)");

  auto v9 = good;
  v9[4] = 9;
  write_file(path, v9);
  CHECK(load_error(path) == prefix + "unsupported version 9 (this build reads version 1)");

  auto flipped = good;
  flipped[good.size() / 2] ^= 0x10;
  write_file(path, flipped);
  CHECK_THAT(load_error(path), Catch::StartsWith(prefix + "corrupted: checksum mismatch"));

  write_file(path, good + "x");
  CHECK(load_error(path) == prefix + "corrupted: 1 unexpected bytes after the body");

  fs::create_directories(tmp_path("a-directory.ckpt"));
  CHECK_THAT(load_error(tmp_path("a-directory.ckpt")),
             Catch::Contains("a-directory.ckpt': not a regular file"));
}

TEST_CASE("corrupted checkpoints never crash the loader", "[checkpoint][fuzz]") {
  auto good = encode_checkpoint(sample_checkpoint());
  std::mt19937_64 rng(99);
  int rejected = 0, decoded = 0;
  for (int i = 0; i < 2000; ++i) {
    auto s = good;
    auto at = 24 + rng() % (s.size() - 24);
    s[at] = static_cast<char>(rng());
    if (i % 2 == 0)
      s.resize(24 + rng() % (s.size() - 24));
    // Re-seal the checksum half of the time so the body parser itself is
    // exercised, not just the checksum check.
    bool reseal = i % 4 < 2;
    if (reseal) {
      std::uint64_t len = s.size() - 24;
      std::memcpy(s.data() + 8, &len, 8);
      // Recompute by round-tripping through the public API is impossible for
      // a broken body, so patch the stored sum from a failed decode message.
      try {
        decode_checkpoint(s, "fuzz");
      } catch (const checkpoint_error& e) {
        std::string msg = e.what();
        auto pos = msg.find("computed 0x");
        if (pos != std::string::npos) {
          auto sum = std::stoull(msg.substr(pos + 11, 16), nullptr, 16);
          std::memcpy(s.data() + 16, &sum, 8);
        }
      }
    }
    try {
      decode_checkpoint(s, "fuzz");
      ++decoded;
    } catch (const checkpoint_error& e) {
      CHECK_THAT(std::string(e.what()), Catch::StartsWith("checkpoint 'fuzz': "));
      ++rejected;
    }
  }
  INFO("decoded " << decoded << ", rejected " << rejected);
  CHECK(rejected > 1000);
}
