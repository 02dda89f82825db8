// Compressed activations, gradients and all-reduce chunks on the wire: fewer
// bytes per link, training close to the uncompressed run; uncompressed stays
// bit-exact (the equivalence tests).
#include "job_test_helpers.hpp"

#include <catch2/catch.hpp>

using namespace asteroid;
using namespace asteroid::test;
using nlohmann::json;

namespace {

struct compressed_run {
  actors::job_result result;
  int64_t activation_bytes = 0; ///< per step, downstream links
  int64_t gradient_bytes = 0;   ///< per step, upstream links
  int64_t all_reduce_bytes = 0; ///< per step, stage 1's ring
};

compressed_run run_compressed(const std::string& activations, const std::string& gradients,
                              bool error_feedback, const std::string& all_reduce = "none") {
  auto train = synthetic(16 * 30);
  // cnn: conv1, conv2 | fc1, classifier; stage 1 on two devices (5 + 3 rows).
  auto job = base_job("cnn", make_plan(16, 2, {{0, 2, {0}, {8}},
                                              {2, 4, {1, 2}, {5, 3}}}));
  job.optimizer.lr = 0.02;
  job.compression.activations = activations;
  job.compression.gradients = gradients;
  job.compression.error_feedback = error_feedback;
  job.compression.all_reduce = all_reduce;
  job.check_replicas = true;
  in_process env{3};
  compressed_run out;
  out.result = actors::run_job(*env.sys, job, env.devices, fresh_model("cnn", job.seed),
                               train, nullptr);
  for (auto& [link, bytes] : out.result.iterations.back()["link_bytes"].items()) {
    if (link.rfind("s0", 0) == 0)
      out.activation_bytes += bytes.get<int64_t>();
    else if (link.rfind("s1", 0) == 0)
      out.gradient_bytes += bytes.get<int64_t>();
    else if (link.rfind("ar ", 0) == 0)
      out.all_reduce_bytes += bytes.get<int64_t>();
  }
  return out;
}

} // namespace

TEST_CASE("compression: fp16 or int8 activations and fp16 or bf16 gradients cut "
          "the bytes per link and train close to the uncompressed run",
          "[compression]") {
  auto plain = run_compressed("none", "none", false);
  REQUIRE(plain.activation_bytes > 0);
  REQUIRE(plain.gradient_bytes > 0);
  const double plain_loss = plain.result.last_loss;
  INFO("uncompressed: loss " << plain_loss << ", bytes " << plain.activation_bytes << " / "
                             << plain.gradient_bytes);

  auto half = run_compressed("fp16", "fp16", false);
  INFO("fp16: loss " << half.result.last_loss << ", bytes " << half.activation_bytes
                     << " / " << half.gradient_bytes);
  // Every link carries at most 55 % of the uncompressed bytes (2 bytes per
  // element instead of 4, plus the same record headers).
  CHECK(half.activation_bytes <= plain.activation_bytes * 0.55);
  CHECK(half.gradient_bytes <= plain.gradient_bytes * 0.55);
  CHECK(half.result.last_loss == Approx(plain_loss).epsilon(0.05));
  // Stage 1's two replicas end with the same weights and momentum.
  CHECK(plain.result.replica_divergence == 0);
  CHECK(half.result.replica_divergence == 0);
  CHECK(max_abs_diff(half.result.model, plain.result.model) < 1e-2);
  // The rounding is real: the weights are not the uncompressed ones.
  CHECK(max_abs_diff(half.result.model, plain.result.model) > 0);

  auto quarter = run_compressed("int8-channel", "bf16", true);
  INFO("int8-channel / bf16 with error feedback: loss " << quarter.result.last_loss
       << ", bytes " << quarter.activation_bytes << " / " << quarter.gradient_bytes);
  CHECK(quarter.activation_bytes <= plain.activation_bytes * 0.30);
  CHECK(quarter.gradient_bytes <= plain.gradient_bytes * 0.55);
  CHECK(quarter.result.last_loss == Approx(plain_loss).epsilon(0.10));
}

TEST_CASE("compression: fp16 all-reduce chunks halve the ring's bytes and "
          "train close to the uncompressed run", "[compression]") {
  auto plain = run_compressed("none", "none", false);
  REQUIRE(plain.all_reduce_bytes > 0);
  auto half = run_compressed("none", "none", false, "fp16");
  INFO("all-reduce bytes per step " << plain.all_reduce_bytes << " -> "
       << half.all_reduce_bytes << "; loss " << plain.result.last_loss << " -> "
       << half.result.last_loss);
  CHECK(half.all_reduce_bytes <= plain.all_reduce_bytes * 0.55);
  CHECK(half.activation_bytes == plain.activation_bytes); // untouched
  // The rounded chunks are the same on both replicas: the owner of each
  // sum keeps what it sends.
  CHECK(half.result.replica_divergence == 0);
  CHECK(half.result.last_loss == Approx(plain.result.last_loss).epsilon(0.05));
  CHECK(max_abs_diff(half.result.model, plain.result.model) < 1e-2);
  CHECK(max_abs_diff(half.result.model, plain.result.model) > 0);
}

TEST_CASE("compression: the job file names a codec it does not know, an int8 "
          "gradient and error feedback without a gradient codec", "[compression]") {
  json job{{"model", "mlp"}, {"nodes", {"127.0.0.1:1"}}, {"planner", "asteroid"}};
  job["compression"] = {{"activations", "fp8"}};
  CHECK_THROWS_WITH(actors::parse_job(job, "j.json"),
                    Catch::Contains("compression") && Catch::Contains("activations")
                      && Catch::Contains("unknown wire codec 'fp8'"));
  job["compression"] = {{"gradients", "int8"}};
  CHECK_THROWS_WITH(actors::parse_job(job, "j.json"),
                    Catch::Contains("gradients take none, fp16 or bf16"));
  job["compression"] = {{"error_feedback", true}};
  CHECK_THROWS_WITH(actors::parse_job(job, "j.json"),
                    Catch::Contains("error_feedback: needs a gradients codec"));
  job["compression"] = {{"all_reduce", "int8"}};
  CHECK_THROWS_WITH(actors::parse_job(job, "j.json"),
                    Catch::Contains("all_reduce take none, fp16 or bf16"));
  job["compression"] = {{"activation", "fp16"}};
  CHECK_THROWS_AS(actors::parse_job(job, "j.json"), std::exception);
  job["compression"] = {{"activations", "int8"}, {"gradients", "bf16"},
                        {"error_feedback", true}};
  auto s = actors::parse_job(job, "j.json");
  CHECK(s.compression.activations == "int8");
  CHECK(s.compression.gradients == "bf16");
  CHECK(s.compression.error_feedback);
  CHECK(s.compression.all_reduce == "none");
  CHECK_FALSE(s.check_replicas);
  job["check_replicas"] = true;
  CHECK(actors::parse_job(job, "j.json").check_replicas);
  job["compression"] = {{"all_reduce", "bf16"}};
  CHECK(actors::parse_job(job, "j.json").compression.all_reduce == "bf16");
}
