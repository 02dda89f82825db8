#include <catch2/catch.hpp>

#include "asteroid/data/data_error.hpp"
#include "asteroid/data/fashion_mnist.hpp"
#include "asteroid/data/idx.hpp"
#include "test_files.hpp"

using namespace asteroid::data;
using namespace asteroid::data::test;
using Catch::Matchers::Contains;

TEST_CASE("data: IDX readers read gzipped and plain files alike", "[data][idx]") {
  auto dir = scratch_dir("idx_roundtrip");
  auto images = idx_images(3, 4, 5);
  write_gz(dir + "/images.gz", images);
  write_plain(dir + "/images", images);
  auto from_gz = read_idx_images(dir + "/images.gz");
  auto from_plain = read_idx_images(dir + "/images");
  REQUIRE(from_gz.sizes() == torch::IntArrayRef{3, 4, 5});
  REQUIRE(from_gz.scalar_type() == torch::kUInt8);
  REQUIRE(torch::equal(from_gz, from_plain));
  // Pixel k of the file is k % 251: image 2, row 3, col 4 is pixel 2*20 + 3*5 + 4 = 59.
  CHECK(from_gz[2][3][4].item<int>() == 59);
  CHECK(from_gz[0][0][1].item<int>() == 1);

  write_gz(dir + "/labels.gz", idx_labels(13));
  auto labels = read_idx_labels(dir + "/labels.gz");
  REQUIRE(labels.scalar_type() == torch::kInt64);
  REQUIRE(labels.size(0) == 13);
  CHECK(labels[12].item<int64_t>() == 2);
}

TEST_CASE("data: IDX readers name the file and the problem", "[data][idx]") {
  auto dir = scratch_dir("idx_errors");
  auto expect_error = [](const std::string& path, bool images, const std::string& problem) {
    INFO(path);
    try {
      if (images)
        read_idx_images(path);
      else
        read_idx_labels(path);
      FAIL("no exception for " << path);
    } catch (const data_error& e) {
      CHECK_THAT(e.what(), Contains(path + ": ") && Contains(problem));
    }
  };

  SECTION("missing file") {
    expect_error(dir + "/nope-idx3-ubyte.gz", true, "no such file");
  }
  SECTION("wrong magic, gzipped") {
    write_gz(dir + "/magic.gz", idx_images(2, 28, 28, 1234));
    expect_error(dir + "/magic.gz", true, "wrong magic 1234, expected 2051 (IDX images)");
    // A label file handed to the image reader is caught by its magic too.
    write_gz(dir + "/labels.gz", idx_labels(20));
    expect_error(dir + "/labels.gz", true, "wrong magic 2049, expected 2051 (IDX images)");
    expect_error(dir + "/magic.gz", false, "wrong magic 1234, expected 2049 (IDX labels)");
  }
  SECTION("truncated payload, gzipped and plain") {
    auto images = idx_images(10, 28, 28);
    images.resize(images.size() - 100);
    write_gz(dir + "/short.gz", images);
    write_plain(dir + "/short", images);
    for (auto name : {"/short.gz", "/short"})
      expect_error(dir + name, true,
                   "truncated: header says 10 images of 28x28 (7856 bytes) but the file has "
                   "7756 bytes");
    auto labels = idx_labels(10);
    labels.pop_back();
    write_gz(dir + "/labels.gz", labels);
    expect_error(dir + "/labels.gz", false,
                 "truncated: header says 10 labels (18 bytes) but the file has 17 bytes");
  }
  SECTION("truncated header") {
    write_gz(dir + "/tiny.gz", bytes{0, 0, 8});
    expect_error(dir + "/tiny.gz", true, "truncated: 3 bytes, shorter than the 16-byte IDX images");
    write_plain(dir + "/empty", bytes{});
    expect_error(dir + "/empty", false, "truncated: 0 bytes, shorter than the 8-byte IDX labels");
  }
  SECTION("trailing bytes") {
    auto labels = idx_labels(4);
    labels.push_back(7);
    labels.push_back(7);
    write_gz(dir + "/long.gz", labels);
    expect_error(dir + "/long.gz", false, "2 trailing bytes: header says 4 labels");
  }
  SECTION("cut-off gzip stream") {
    write_gz(dir + "/full.gz", idx_images(50, 28, 28));
    auto gz = read_plain(dir + "/full.gz");
    gz.resize(gz.size() / 2);
    write_plain(dir + "/cut.gz", gz);
    expect_error(dir + "/cut.gz", true, "damaged or truncated gzip data");
  }
  SECTION("corrupt gzip stream") {
    write_gz(dir + "/full.gz", idx_images(50, 28, 28));
    auto gz = read_plain(dir + "/full.gz");
    for (size_t i = 20; i < 60; ++i)
      gz[i] ^= 0x5a;
    write_plain(dir + "/corrupt.gz", gz);
    expect_error(dir + "/corrupt.gz", true, "damaged or truncated gzip data");
  }
  SECTION("zero dimension") {
    write_gz(dir + "/flat.gz", idx_images(3, 0, 28));
    expect_error(dir + "/flat.gz", true, "zero image dimension in header (3 images of 0x28)");
  }
  SECTION("a directory") {
    expect_error(dir, true, "is a directory");
  }
}

TEST_CASE("data: Fashion-MNIST loader checks files against each other", "[data][fashion-mnist]") {
  auto dir = scratch_dir("fashion_errors");
  auto expect_error = [&](split which, const std::string& problem) {
    try {
      load_fashion_mnist(dir, which);
      FAIL("no exception");
    } catch (const data_error& e) {
      CHECK_THAT(e.what(), Contains(problem));
    }
  };

  SECTION("missing files name the gz path and the plain alternative") {
    expect_error(split::train, dir + "/train-images-idx3-ubyte.gz: no such file "
                                     "(nor uncompressed " + dir + "/train-images-idx3-ubyte)");
    write_gz(dir + "/t10k-images-idx3-ubyte.gz", idx_images(4, 28, 28));
    expect_error(split::test, dir + "/t10k-labels-idx1-ubyte.gz: no such file");
  }
  SECTION("mismatched counts") {
    write_gz(dir + "/train-images-idx3-ubyte.gz", idx_images(12, 28, 28));
    write_gz(dir + "/train-labels-idx1-ubyte.gz", idx_labels(11));
    expect_error(split::train, dir + "/train-images-idx3-ubyte.gz has 12 images but " + dir +
                                 "/train-labels-idx1-ubyte.gz has 11 labels: counts must agree");
  }
  SECTION("wrong image size") {
    write_gz(dir + "/train-images-idx3-ubyte.gz", idx_images(2, 32, 32));
    write_gz(dir + "/train-labels-idx1-ubyte.gz", idx_labels(2));
    expect_error(split::train, dir + "/train-images-idx3-ubyte.gz: images are 32x32, expected "
                                     "28x28 (Fashion-MNIST)");
  }
  SECTION("label out of range") {
    auto labels = idx_labels(5);
    labels[8 + 3] = 10;
    write_gz(dir + "/train-images-idx3-ubyte.gz", idx_images(5, 28, 28));
    write_gz(dir + "/train-labels-idx1-ubyte.gz", labels);
    expect_error(split::train, dir + "/train-labels-idx1-ubyte.gz: label 10 at index 3 is out of "
                                     "range [0, 10)");
  }
  SECTION("wrong magic reaches the caller") {
    write_gz(dir + "/train-images-idx3-ubyte.gz", idx_images(5, 28, 28, 1234));
    write_gz(dir + "/train-labels-idx1-ubyte.gz", idx_labels(5));
    expect_error(split::train, dir + "/train-images-idx3-ubyte.gz: wrong magic 1234, expected "
                                     "2051 (IDX images)");
  }
}

TEST_CASE("data: Fashion-MNIST loader prefers uncompressed files and normalises",
          "[data][fashion-mnist]") {
  auto dir = scratch_dir("fashion_small");
  write_gz(dir + "/t10k-images-idx3-ubyte.gz", idx_images(6, 28, 28));
  write_gz(dir + "/t10k-labels-idx1-ubyte.gz", idx_labels(6));
  auto gz = load_fashion_mnist(dir, split::test, false);
  REQUIRE(gz.size() == 6);
  REQUIRE(gz.sample_shape() == std::vector<int64_t>{1, 28, 28});
  CHECK(gz.name() == "fashion-mnist/test");
  // Pixel 1 of image 0 is byte 1.
  CHECK(gz.inputs()[0][0][0][1].item<float>() == Approx(1.0 / 255));
  auto normalized = load_fashion_mnist(dir, split::test, true);
  CHECK(torch::allclose(normalized.inputs(),
                        (gz.inputs() - fashion_mnist_mean) / fashion_mnist_std));

  // A plain file next to the .gz one wins: make it differ in a visible way.
  auto images = idx_images(6, 28, 28);
  images[16] = 255;
  write_plain(dir + "/t10k-images-idx3-ubyte", images);
  auto plain = load_fashion_mnist(dir, split::test, false);
  CHECK(plain.inputs()[0][0][0][0].item<float>() == Approx(1.0));
  CHECK(gz.inputs()[0][0][0][0].item<float>() == Approx(0.0));
  CHECK(torch::equal(plain.targets(), gz.targets()));
}
