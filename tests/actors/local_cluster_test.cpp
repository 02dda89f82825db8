// The log folder of a local cluster: one it made itself is removed with it,
// unless its logs may explain a failure (ports 27300-27304).
#include "job_test_helpers.hpp"

#include <catch2/catch.hpp>

#include <filesystem>
#include <stdexcept>
#include <string>

using namespace asteroid;
using namespace asteroid::test;
namespace fs = std::filesystem;

namespace {

/// One node, logging to a folder of the cluster's own making.
actors::local_cluster::options own_folder(uint16_t port) {
  auto o = cluster_options(1, port);
  o.log_dir.clear();
  return o;
}

} // namespace

TEST_CASE("a local cluster removes the log folder it made when it stops") {
  std::string dir;
  {
    actors::local_cluster cluster{own_folder(27300)};
    dir = cluster.log_dir();
    REQUIRE_FALSE(dir.empty());
    CHECK(fs::is_regular_file(cluster.log_path(0)));
  }
  CHECK_FALSE(fs::exists(dir));
}

TEST_CASE("a local cluster keeps a log folder it was given") {
  auto o = cluster_options(1, 27301);
  { actors::local_cluster cluster{o}; }
  CHECK(fs::is_regular_file(o.log_dir + "/node0.log"));
}

TEST_CASE("a local cluster keeps its own log folder when asked or when a "
          "failure unwinds it") {
  std::string dir;
  SECTION("asked by its owner") {
    actors::local_cluster cluster{own_folder(27302)};
    dir = cluster.log_dir();
    cluster.keep_logs();
  }
  SECTION("asked by option") {
    auto o = own_folder(27303);
    o.keep_logs = true;
    actors::local_cluster cluster{o};
    dir = cluster.log_dir();
  }
  SECTION("an exception") {
    try {
      actors::local_cluster cluster{own_folder(27304)};
      dir = cluster.log_dir();
      throw std::runtime_error("a failed job");
    } catch (const std::runtime_error&) {
    }
  }
  REQUIRE_FALSE(dir.empty());
  CHECK(fs::is_regular_file(dir + "/node0.log"));
  fs::remove_all(dir);
}
