#include <catch2/catch.hpp>

#include "asteroid/data/cifar10.hpp"
#include "asteroid/data/data_error.hpp"
#include "test_files.hpp"

using namespace asteroid::data;
using namespace asteroid::data::test;
using Catch::Matchers::Contains;

namespace {

// `count` records; record r has label (r + first_label) % 10 and every pixel of channel c equal
// to (r * 3 + c + first_label) % 256, so file order and channel layout are visible.
bytes cifar_records(int count, int first_label) {
  bytes out;
  for (int r = 0; r < count; ++r) {
    out.push_back(static_cast<uint8_t>((r + first_label) % 10));
    for (int c = 0; c < 3; ++c)
      out.insert(out.end(), 1024, static_cast<uint8_t>((r * 3 + c + first_label) % 256));
  }
  return out;
}

void expect_error(const std::string& path, const std::string& problem) {
  try {
    read_cifar10_file(path);
    FAIL("no exception for " << path);
  } catch (const data_error& e) {
    CHECK_THAT(e.what(), Contains(path + ": " + problem));
  }
}

} // namespace

TEST_CASE("data: CIFAR-10 reader decodes records", "[data][cifar10]") {
  auto dir = scratch_dir("cifar_small");
  write_plain(dir + "/one.bin", cifar_records(4, 0));
  auto records = read_cifar10_file(dir + "/one.bin");
  REQUIRE(records.images.sizes() == torch::IntArrayRef{4, 3, 32, 32});
  REQUIRE(records.labels.sizes() == torch::IntArrayRef{4});
  CHECK(records.labels[3].item<int64_t>() == 3);
  CHECK(records.images[2][1][31][31].item<int>() == 7);
  CHECK(records.images[2][2][0][0].item<int>() == 8);
  CHECK(records.images[3].min().item<int>() == 9);
}

TEST_CASE("data: CIFAR-10 loader concatenates the batches of a split and normalises",
          "[data][cifar10]") {
  auto dir = scratch_dir("cifar_split");
  for (int b = 1; b <= 5; ++b)
    write_plain(dir + "/data_batch_" + std::to_string(b) + ".bin", cifar_records(3, b));
  // gzipped content under the plain name is read as well (zlib detects it).
  write_gz(dir + "/test_batch.bin", cifar_records(2, 0));

  auto train = load_cifar10(dir, split::train, false);
  REQUIRE(train.size() == 15);
  CHECK(train.sample_shape() == std::vector<int64_t>{3, 32, 32});
  CHECK(train.name() == "cifar10/train");
  // Record 0 of data_batch_2 is sample 3: label 2, channel 1 pixel (0*3 + 1 + 2) = 3.
  CHECK(train.targets()[3].item<int64_t>() == 2);
  CHECK(train.inputs()[3][1][5][5].item<float>() == Approx(3.0 / 255));

  auto test = load_cifar10(dir, split::test, true);
  REQUIRE(test.size() == 2);
  // Record 1, channel 2: pixel 5 -> (5/255 - mean[2]) / std[2].
  CHECK(test.inputs()[1][2][0][0].item<float>() ==
        Approx((5.0 / 255 - cifar10_mean[2]) / cifar10_std[2]));
  CHECK(test.inputs()[1][0][0][0].item<float>() ==
        Approx((3.0 / 255 - cifar10_mean[0]) / cifar10_std[0]));
}

TEST_CASE("data: CIFAR-10 reader names the file and the problem", "[data][cifar10]") {
  auto dir = scratch_dir("cifar_errors");
  SECTION("missing") {
    expect_error(dir + "/data_batch_1.bin", "no such file");
    try {
      load_cifar10(dir, split::test);
      FAIL("no exception");
    } catch (const data_error& e) {
      CHECK_THAT(e.what(), Contains(dir + "/test_batch.bin: no such file"));
    }
  }
  SECTION("truncated") {
    auto records = cifar_records(3, 0);
    records.resize(records.size() - 10);
    write_plain(dir + "/short.bin", records);
    expect_error(dir + "/short.bin",
                 "size 9209 is not a multiple of the 3073-byte CIFAR-10 record");
  }
  SECTION("empty") {
    write_plain(dir + "/empty.bin", bytes{});
    expect_error(dir + "/empty.bin", "empty file");
  }
  SECTION("label out of range") {
    auto records = cifar_records(3, 0);
    records[2 * 3073] = 10;
    write_gz(dir + "/bad.bin", records);
    expect_error(dir + "/bad.bin", "record 2 has label 10, out of range [0, 10)");
  }
  SECTION("no folder") {
    CHECK_THROWS_WITH(load_cifar10("", split::train), Contains("cifar10: no folder given"));
  }
}
