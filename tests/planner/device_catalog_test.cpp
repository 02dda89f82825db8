#include <catch2/catch.hpp>

#include <cmath>

#include "asteroid/planner/device_catalog.hpp"
#include "asteroid/planner/error.hpp"
#include "asteroid/planner/json_io.hpp"
#include "test_helpers.hpp"

using namespace asteroid::planner;

TEST_CASE("catalog speeds are derived from the paper's epoch times", "[planner][catalog]") {
  const auto& nano = device_type("jetson-nano");
  const auto& tx2 = device_type("jetson-tx2");
  const auto& nx = device_type("xavier-nx");
  CHECK(nano.speed == 1.0);
  // Geometric mean of MobileNetV2 22/8.5 and EfficientNet-B1 26.7/11.2.
  CHECK(tx2.speed == Approx(std::sqrt((22.0 / 8.5) * (26.7 / 11.2))));
  CHECK(tx2.speed > 26.7 / 11.2);
  CHECK(tx2.speed < 22.0 / 8.5);
  // NX: assumption, scaled by cores x clock from TX2.
  CHECK(nx.speed_is_assumption);
  CHECK_FALSE(tx2.speed_is_assumption);
  CHECK(nx.speed == Approx(tx2.speed * 384 * 1100 / (256 * 1300.0)));
  CHECK(nano.memory_bytes == 4LL << 30);
  CHECK(tx2.memory_bytes == 8LL << 30);
  CHECK(nx.memory_bytes == 8LL << 30);
  CHECK_THROWS_WITH(device_type("pixel"), Catch::Contains("unknown device type \"pixel\"") &&
                                            Catch::Contains("xavier-nx"));
}

TEST_CASE("profiles scale between device types", "[planner][catalog]") {
  model_profile p;
  p.model = "m";
  p.device = "jetson-nano";
  p.layers.push_back(test::linear_layer("l", 1.0, 2.0, 10, 10));
  auto q = scale_profile(p, "jetson-tx2");
  CHECK(q.device == "jetson-tx2");
  CHECK(q.layers[0].forward_s[0] == Approx(1.0 / device_type("jetson-tx2").speed));
  CHECK(q.layers[0].backward_s[1] == Approx(32.0 / device_type("jetson-tx2").speed));
  auto back = scale_profile(q, "jetson-nano");
  CHECK(back.layers[0].forward_s[0] == Approx(1.0));
  CHECK_THROWS_AS(scale_profile(p, 0.0, "x"), planner_error);

  // A TX2-measured profile on a mixed cluster: speeds become TX2-relative.
  auto c = cluster::uniform("c", {make_device("n", "jetson-nano"), make_device("t", "jetson-tx2")},
                            1e8);
  auto r = rebase_speeds(c, q);
  CHECK(r.devices[1].speed == Approx(1.0));
  CHECK(r.devices[0].speed == Approx(1.0 / device_type("jetson-tx2").speed));
  // Unknown profiling device: speeds unchanged.
  p.device = "local";
  CHECK(rebase_speeds(c, p).devices[1].speed == c.devices[1].speed);
}

TEST_CASE("absolute speeds come from seconds per sample: the device's own, else the "
          "paper's for its type",
          "[planner][catalog]") {
  // The paper's CIFAR-10 epochs (50,000 samples): EfficientNet-B1 26.7 min on a
  // Nano, 11.2 min on a TX2.
  CHECK(seconds_per_sample(make_device("n", "jetson-nano"), "efficientnet_b1") ==
        Approx(26.7 * 60 / 50000));
  CHECK(seconds_per_sample(make_device("t", "jetson-tx2"), "EfficientNet-B1") ==
        Approx(11.2 * 60 / 50000));
  CHECK(seconds_per_sample(make_device("t", "jetson-tx2"), "mobilenet_v2") ==
        Approx(8.5 * 60 / 50000));
  // Xavier NX: an assumption scaled from the TX2, and said so.
  const auto& nx = device_type("xavier-nx");
  CHECK(nx.seconds_per_sample.at("mobilenetv2") ==
        Approx(8.5 * 60 / 50000 / (nx.speed / device_type("jetson-tx2").speed)));
  CHECK_THAT(nx.seconds_per_sample_source.at("mobilenetv2"), Catch::Contains("ASSUMPTION"));
  // ResNet-50: the paper's TX2 epoch (1.14 h, 60,000 Mini-ImageNet images
  // assumed); no Nano time in the paper, so the catalog's speed ratio, said so.
  const auto& tx2 = device_type("jetson-tx2");
  CHECK(seconds_per_sample(make_device("t", "jetson-tx2"), "resnet50") ==
        Approx(1.14 * 3600 / 60000));
  CHECK(seconds_per_sample(make_device("n", "jetson-nano"), "ResNet-50") ==
        Approx(1.14 * 3600 / 60000 * tx2.speed));
  CHECK_THAT(device_type("jetson-nano").seconds_per_sample_source.at("resnet50"),
             Catch::Contains("ASSUMPTION"));
  CHECK(nx.seconds_per_sample.at("resnet50") ==
        Approx(1.14 * 3600 / 60000 / (nx.speed / tx2.speed)));
  CHECK(seconds_per_sample(make_device("n", "jetson-nano"), "bert_small") == 0);
  // Each figure is for the paper's input, which a machine measured against it
  // must run.
  CHECK(nlohmann::json::parse(catalog_model_options("resnet50")) ==
        nlohmann::json{{"image_size", 224}, {"num_classes", 100}});
  CHECK(nlohmann::json::parse(catalog_model_options("EfficientNet-B1")) ==
        nlohmann::json{{"image_size", 32}, {"num_classes", 10}});
  CHECK(catalog_model_options("bert_small").empty());

  auto c = cluster::uniform("c", {make_device("nano", "jetson-nano"),
                                  make_device("tx2", "jetson-tx2")},
                            1e8);
  // A machine that needs 13 ms per sample: the Nano (32.04 ms) runs at 0.406
  // of it, the TX2 (13.44 ms) at 0.967.
  auto a = absolute_speeds(c, "efficientnet-b1", 0.013);
  CHECK(a.devices[0].speed == Approx(0.013 / (26.7 * 60 / 50000)));
  CHECK(a.devices[1].speed == Approx(0.013 / (11.2 * 60 / 50000)));
  // A device's own figure wins over its type's.
  c.devices[0].seconds_per_sample["efficientnet_b1"] = 0.026;
  CHECK(absolute_speeds(c, "efficientnet-b1", 0.013).devices[0].speed == Approx(0.5));
  CHECK_THROWS_WITH(absolute_speeds(c, "bert_small", 0.013),
                    Catch::Contains("device nano (jetson-nano) has no seconds_per_sample for "
                                    "model \"bert_small\""));
  CHECK_THROWS_AS(absolute_speeds(c, "efficientnet-b1", 0), planner_error);
}

TEST_CASE("a cluster file states seconds per sample per device and model",
          "[planner][catalog][json]") {
  auto j = nlohmann::json::parse(R"({"devices": [
      {"name": "laptop", "speed": 4, "memory": "8GiB",
       "seconds_per_sample": {"efficientnet-b1": 0.004}},
      {"name": "nano", "type": "jetson-nano"}], "link_mbps": 100})");
  auto c = parse_cluster(j, "lab.json");
  CHECK(c.devices[0].seconds_per_sample.at("efficientnet-b1") == 0.004);
  auto a = absolute_speeds(c, "efficientnet_b1", 0.008);
  CHECK(a.devices[0].speed == Approx(2.0));
  // Round trip through JSON keeps it.
  nlohmann::json back = c.devices[0];
  CHECK(back["seconds_per_sample"]["efficientnet-b1"] == 0.004);
  j["devices"][0]["seconds_per_sample"]["efficientnet-b1"] = -1;
  CHECK_THROWS_WITH(parse_cluster(j, "lab.json"),
                    Catch::Contains("lab.json: devices[0].seconds_per_sample.efficientnet-b1"));
  j["devices"][0]["seconds_per_sample"] = 3;
  CHECK_THROWS_WITH(parse_cluster(j, "lab.json"),
                    Catch::Contains("expected an object of model name: seconds"));
}
