#include "asteroid/actors/exit_cleanup.hpp"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

using namespace asteroid;
namespace fs = std::filesystem;

namespace {

fs::path fresh_folder(const std::string& name) {
  auto dir = fs::path(ASTEROID_TEST_TMP) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

} // namespace

TEST_CASE("exit cleanup: registered files and folders go, nested folders too, "
          "whatever order the slots hold them in, and withdrawn and foreign ones stay") {
  auto root = fresh_folder("exit-cleanup");
  auto ours = root / "ours", nested = ours / "node0";
  fs::create_directories(nested);
  std::ofstream(ours / "ca.crt") << "x";
  std::ofstream(nested / "key") << "x";
  std::ofstream(root / "kept") << "x";
  auto foreign = root / "foreign";
  fs::create_directories(foreign);
  std::ofstream(foreign / "theirs") << "x";

  // Files first and their folders after (the order a reused slot can give),
  // then a withdrawn path and a folder holding something unregistered.
  int files[] = {actors::remember_path_for_exit((nested / "key").string()),
                 actors::remember_path_for_exit((ours / "ca.crt").string())};
  int folders[] = {actors::remember_path_for_exit(nested.string()),
                   actors::remember_path_for_exit(ours.string())};
  int kept = actors::remember_path_for_exit((root / "kept").string());
  int theirs = actors::remember_path_for_exit(foreign.string());
  for (int t : files)
    REQUIRE(t >= 0);
  for (int t : folders)
    REQUIRE(t >= 0);
  REQUIRE(kept >= 0);
  REQUIRE(theirs >= 0);
  actors::forget_path(kept);

  actors::remove_registered_paths();
  CHECK_FALSE(fs::exists(ours));
  CHECK(fs::exists(root / "kept"));
  CHECK(fs::exists(foreign / "theirs"));

  for (int t : files)
    actors::forget_path(t);
  for (int t : folders)
    actors::forget_path(t);
  actors::forget_path(theirs);
  actors::forget_path(-1); // ignored
  fs::remove_all(root);
}
