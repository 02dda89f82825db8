#include <catch2/catch.hpp>

#include "asteroid/training/metrics_sink.hpp"
#include "asteroid/training/progress_line.hpp"
#include "asteroid/training/trainer.hpp"

#include <fstream>

using namespace asteroid;

TEST_CASE("a run writes JSON-lines metrics", "[training][metrics]") {
  auto path = std::string{ASTEROID_TEST_TMP} + "/metrics.jsonl";
  training::trainer_options o;
  o.model = "mlp";
  o.dataset = "synthetic-images";
  o.train_limit = 64;
  o.test_limit = 32;
  o.batch_size = 16;
  o.epochs = 1;
  o.log_every = 2;
  o.progress = 0;
  o.metrics_path = path;
  training::trainer{o}.run();

  std::ifstream in{path};
  std::string line;
  std::vector<std::string> events;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    REQUIRE(j.contains("time"));
    events.push_back(j.at("event"));
    if (events.back() == "step")
      CHECK(j.at("loss").get<double>() > 0);
    if (events.back() == "eval")
      CHECK(j.at("test_accuracy").get<double>() >= 0);
  }
  CHECK(events == std::vector<std::string>{"start", "step", "step", "eval",
                                           "done"});
}

TEST_CASE("a metrics file that cannot be opened is named", "[training][errors]") {
  CHECK_THROWS_WITH(training::metrics_sink{"/no/such/dir/m.jsonl"},
                    Catch::Contains("/no/such/dir/m.jsonl"));
}

TEST_CASE("ETA formatting", "[training][metrics]") {
  CHECK(training::progress_line::format_eta(5) == "0:05");
  CHECK(training::progress_line::format_eta(125) == "2:05");
  CHECK(training::progress_line::format_eta(3725) == "1:02:05");
  CHECK(training::progress_line::format_eta(-1) == "--:--");
}
