// Compressed activations, gradients and all-reduce chunks on the wire: fewer
// bytes per link, training close to the uncompressed run; uncompressed stays
// bit-exact (the equivalence tests).
#include "job_test_helpers.hpp"

#include <catch2/catch.hpp>

#include <map>

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

namespace {

using link_bytes = std::map<std::string, int64_t>;

link_bytes bytes_of_last_step(const actors::job_result& r) {
  link_bytes out;
  for (auto& [link, bytes] : r.iterations.back()["link_bytes"].items())
    out[link] = bytes.get<int64_t>();
  return out;
}

} // namespace

TEST_CASE("compression: a job that compresses only links slower than below_mbps "
          "sends float32 over its fast links and the codec over the slow ones, "
          "a ring as a whole", "[compression]") {
  // Node 2 sends at 40 Mbit/s, nodes 0 and 1 as fast as loopback goes: every
  // link to or from node 2 measures slow.
  auto o = cluster_options(3, 27323);
  o.link_rates_mbps = {0, 0, 40};
  actors::local_cluster cluster{o};
  auto train = synthetic(16 * 6);
  auto run = [&](std::vector<planner::stage_plan> stages, double below_mbps) {
    auto job = base_job("cnn", make_plan(16, 2, std::move(stages)));
    job.optimizer.lr = 0.02;
    job.check_replicas = true;
    if (below_mbps > 0) {
      job.compression.activations = "fp16";
      job.compression.gradients = "fp16";
      job.compression.all_reduce = "fp16";
      job.compression.below_mbps = below_mbps;
    }
    return run_on_cluster(job, cluster, train);
  };
  // The same job uncompressed and with every codec on links below 200
  // Mbit/s, and the bytes of their last steps.
  struct comparison {
    actors::job_result plain, mixed;
    link_bytes a, b;
  };
  auto uncompressed_and_below_200 = [&](const std::vector<planner::stage_plan>& stages) {
    comparison c{run(stages, 0), run(stages, 200), {}, {}};
    c.a = bytes_of_last_step(c.plain);
    c.b = bytes_of_last_step(c.mixed);
    return c;
  };
  const auto compressed = [](int64_t bytes, int64_t plain) {
    return bytes > 0 && bytes <= plain * 0.55;
  };

  SECTION("stage 1's ring holds the slow node: it is compressed, and so is the "
          "link from stage 0 to it; the fast link carries float32") {
    const std::vector<planner::stage_plan> stages{{0, 2, {0}, {8}}, {2, 4, {1, 2}, {5, 3}}};
    const auto c = uncompressed_and_below_200(stages);
    const auto& [plain, mixed, a, b] = c;
    INFO("uncompressed " << nlohmann::json(a).dump() << "; below 200 Mbit/s "
                         << nlohmann::json(b).dump());
    CHECK(b.at("s0r0->s1r0") == a.at("s0r0->s1r0"));           // node 0 -> node 1
    CHECK(b.at("s1r0->s0r0") == a.at("s1r0->s0r0"));           // node 1 -> node 0
    CHECK(compressed(b.at("s0r0->s1r1"), a.at("s0r0->s1r1"))); // node 0 -> node 2
    CHECK(compressed(b.at("s1r1->s0r0"), a.at("s1r1->s0r0"))); // node 2 -> node 0
    CHECK(compressed(b.at("ar s1r0->s1r1"), a.at("ar s1r0->s1r1")));
    CHECK(compressed(b.at("ar s1r1->s1r0"), a.at("ar s1r1->s1r0")));
    CHECK(mixed.replica_divergence == 0);
    CHECK(mixed.last_loss == Approx(plain.last_loss).epsilon(0.05));
    CHECK(max_abs_diff(mixed.model, plain.model) > 0);
  }

  SECTION("a ring of fast nodes stays float32; the slow node's links to it are "
          "compressed") {
    const std::vector<planner::stage_plan> stages{{0, 2, {2}, {8}}, {2, 4, {0, 1}, {5, 3}}};
    const auto c = uncompressed_and_below_200(stages);
    const auto& [plain, mixed, a, b] = c;
    INFO("uncompressed " << nlohmann::json(a).dump() << "; below 200 Mbit/s "
                         << nlohmann::json(b).dump());
    CHECK(b.at("ar s1r0->s1r1") == a.at("ar s1r0->s1r1"));
    CHECK(b.at("ar s1r1->s1r0") == a.at("ar s1r1->s1r0"));
    CHECK(compressed(b.at("s0r0->s1r0"), a.at("s0r0->s1r0")));
    CHECK(compressed(b.at("s1r1->s0r0"), a.at("s1r1->s0r0")));
    CHECK(mixed.replica_divergence == 0);
  }

  SECTION("above every link's rate, every link is compressed; below every "
          "link's, none is and training is bit-exact") {
    const std::vector<planner::stage_plan> stages{{0, 2, {0}, {8}}, {2, 4, {1}, {8}}};
    auto plain = run(stages, 0);
    auto none = run(stages, 1);
    CHECK(bytes_of_last_step(none) == bytes_of_last_step(plain));
    CHECK(max_abs_diff(none.model, plain.model) == 0);
    auto all = run(stages, 1e6);
    CHECK(compressed(bytes_of_last_step(all).at("s0r0->s1r0"),
                     bytes_of_last_step(plain).at("s0r0->s1r0")));
  }
}

TEST_CASE("compression: below_mbps is a rate, 0 or more", "[compression]") {
  json job{{"model", "mlp"}, {"nodes", {"127.0.0.1:1"}}, {"planner", "asteroid"}};
  job["compression"] = {{"activations", "fp16"}, {"below_mbps", 100}};
  CHECK(actors::parse_job(job, "j.json").compression.below_mbps == 100);
  job["compression"]["below_mbps"] = -5;
  CHECK_THROWS_WITH(actors::parse_job(job, "j.json"),
                    Catch::Contains("below_mbps") && Catch::Contains("-5"));
  job["compression"]["below_mbps"] = "fast";
  CHECK_THROWS_WITH(actors::parse_job(job, "j.json"), Catch::Contains("below_mbps"));
}
