#include "asteroid/serialization/tensor_wire.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <cstring>

using namespace asteroid::serialization;

// Hidden ([.]): a measurement, not a pass/fail check. Run with
//   serialization_tests "[bench]"
TEST_CASE("wire throughput for a 16 MiB float tensor", "[.][bench]") {
  auto t = torch::randn({4 * 1024 * 1024}); // 16 MiB of float32
  constexpr int reps = 20;
  using clock = std::chrono::steady_clock;
  auto mibps = [&](clock::duration d) {
    return 16.0 * reps / std::chrono::duration<double>(d).count();
  };
  std::string bytes;
  auto t0 = clock::now();
  for (int i = 0; i < reps; ++i)
    bytes = encode_tensor(t);
  auto t1 = clock::now();
  std::string reused;
  for (int i = 0; i < reps; ++i) {
    reused.clear();
    append_tensor(reused, t);
  }
  auto t2 = clock::now();
  torch::Tensor back;
  for (int i = 0; i < reps; ++i)
    back = decode_tensor(bytes);
  auto t3 = clock::now();
  REQUIRE(torch::equal(back, t));
  auto t4 = clock::now();
  for (int i = 0; i < reps; ++i) {
    back = torch::empty({4 * 1024 * 1024});
    std::memcpy(back.data_ptr(), bytes.data() + 24, 16 << 20);
  }
  auto t5 = clock::now();
  auto dst = torch::empty({4 * 1024 * 1024});
  for (int i = 0; i < reps; ++i)
    decode_tensor_into(bytes, dst);
  auto t6 = clock::now();
  REQUIRE(torch::equal(dst, t));
  // The first line is the floor for decode_tensor(): fresh 16 MiB buffers
  // cost page faults that dwarf the copy itself.
  WARN("torch::empty + memcpy alone: " << mibps(t5 - t4)
                                       << " MiB/s, decode_tensor_into: " << mibps(t6 - t5)
                                       << " MiB/s");
  WARN("encode_tensor: " << mibps(t1 - t0) << " MiB/s, append_tensor (reused buffer): "
                         << mibps(t2 - t1) << " MiB/s, decode_tensor: " << mibps(t3 - t2)
                         << " MiB/s");
}
