// A test case that outlives its watchdog's deadline, for the check that the
// watchdog (test_watchdog.cpp) names it and aborts: tests/watchdog_check.sh.
// Hidden ([.]): no other run selects it.
#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

TEST_CASE("a test case that hangs", "[.hangs]") {
  std::this_thread::sleep_for(std::chrono::seconds(50));
}
