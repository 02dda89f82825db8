#include "asteroid/planner/pipedream_graph.hpp"

#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

using namespace asteroid::planner;

namespace {

// A PipeDream graph.txt of a 3-layer chain profiled at batch size 32, nodes
// listed out of chain order (the edges define the order), edges tab-indented
// as PipeDream writes them.
const char* const small_graph =
    "node1 -- Input0 -- forward_compute_time=0.000, "
    "backward_compute_time=0.000, activation_size=393216.0, "
    "parameter_size=0.000\n"
    "node3 -- ReLU(inplace=True) -- forward_compute_time=0.250, "
    "backward_compute_time=0.500, activation_size=2097152.0, "
    "parameter_size=0.000 -- stage_id=0\n"
    "node2 -- Conv2d(3, 64, kernel_size=(3, 3), stride=(1, 1)) -- "
    "forward_compute_time=4.000, backward_compute_time=8.500, "
    "activation_size=2097152.0, parameter_size=7168.000\n"
    "node4 -- Linear(in_features=65536, out_features=10) -- "
    "forward_compute_time=1.500, backward_compute_time=3.000, "
    "activation_size=[640.0; 640.0], parameter_size=2621480.000\n"
    "\tnode1 -- node2\n"
    "\tnode2 -- node3\n"
    "\tnode3 -- node4\n";

model_profile parse(const std::string& text, int64_t batch = 32) {
  std::istringstream in(text);
  pipedream_import_options opt;
  opt.batch_size = batch;
  opt.model = "tiny-cnn";
  opt.device = "jetson-nano";
  return parse_pipedream_graph(in, opt);
}

std::string node(const std::string& id, const std::string& desc = "L") {
  return id + " -- " + desc +
         " -- forward_compute_time=1.0, backward_compute_time=2.0, "
         "activation_size=64.0, parameter_size=8.0\n";
}

} // namespace

TEST_CASE("PipeDream graph.txt of a chain becomes a model profile") {
  auto p = parse(small_graph);
  CHECK(p.model == "tiny-cnn");
  CHECK(p.device == "jetson-nano");
  CHECK(p.input_bytes_per_sample == 393216 / 32);
  REQUIRE(p.num_layers() == 3);
  const auto& conv = p.layers[0];
  CHECK(conv.name == "Conv2d(3, 64, kernel_size=(3, 3), stride=(1, 1))");
  CHECK(conv.batch_sizes == std::vector<int64_t>{32});
  CHECK(conv.forward_s[0] == Approx(0.004));
  CHECK(conv.backward_s[0] == Approx(0.0085));
  CHECK(conv.output_bytes_per_sample == 65536);
  CHECK(conv.param_bytes == 7168);
  CHECK(conv.optimizer_state_bytes == 7168);
  CHECK(p.layers[1].name == "ReLU(inplace=True)");
  CHECK(p.layers[1].param_bytes == 0);
  // Two outputs of 640 bytes for the batch: 40 bytes per sample.
  CHECK(p.layers[2].output_bytes_per_sample == 40);
  CHECK(p.layers[2].param_bytes == 2621480);
  // One sample point: times scale with the share.
  CHECK(conv.forward_time(16) == Approx(0.002));
  CHECK(p.layers[2].backward_time(64) == Approx(0.006));
}

TEST_CASE("PipeDream import options") {
  std::istringstream in(small_graph);
  pipedream_import_options opt;
  opt.batch_size = 64;
  opt.optimizer_state_factor = 2.0; // Adam
  auto p = parse_pipedream_graph(in, opt);
  CHECK(p.input_bytes_per_sample == 393216 / 64);
  CHECK(p.layers[0].output_bytes_per_sample == 32768);
  CHECK(p.layers[0].optimizer_state_bytes == 2 * 7168);
  CHECK(p.layers[0].batch_sizes == std::vector<int64_t>{64});

  REQUIRE_THROWS_WITH(parse(small_graph, 0),
                      Catch::Contains("graph.txt: batch_size must be positive"));
}

TEST_CASE("a graph without an input node: every node is a layer") {
  auto p = parse(node("node7", "Linear(4, 4)") + node("node8") +
                 "node7 -- node8\n");
  CHECK(p.input_bytes_per_sample == 0);
  REQUIRE(p.num_layers() == 2);
  CHECK(p.layers[0].name == "Linear(4, 4)");
  CHECK(p.layers[0].output_bytes_per_sample == 2);
}

TEST_CASE("a single node without edges is a one-layer chain") {
  auto p = parse(node("node1"));
  CHECK(p.num_layers() == 1);
}

TEST_CASE("malformed graph.txt lines are reported with their line number") {
  SECTION("not a number") {
    REQUIRE_THROWS_WITH(
        parse(node("node1") +
              "node2 -- ReLU -- forward_compute_time=fast, "
              "backward_compute_time=1, activation_size=1, parameter_size=0\n"),
        Catch::Contains("graph.txt:2: forward_compute_time: 'fast' is not a "
                        "number"));
  }
  SECTION("missing key") {
    REQUIRE_THROWS_WITH(
        parse("\n# comment\nnode1 -- ReLU -- forward_compute_time=1, "
              "backward_compute_time=1, parameter_size=0\n"),
        Catch::Contains("graph.txt:3: node node1: missing activation_size"));
  }
  SECTION("negative value") {
    REQUIRE_THROWS_WITH(
        parse("node1 -- ReLU -- forward_compute_time=1, "
              "backward_compute_time=-1, activation_size=1, parameter_size=0\n"),
        Catch::Contains("graph.txt:1: backward_compute_time: -1 is negative"));
  }
  SECTION("garbage line") {
    REQUIRE_THROWS_WITH(parse(node("node1") + "node1 node2\n"),
                        Catch::Contains("graph.txt:2: expected"));
  }
  SECTION("node line without metadata") {
    REQUIRE_THROWS_WITH(parse("node1 -- ReLU -- stage_id=0\n"),
                        Catch::Contains("graph.txt:1: node node1: no "
                                        "forward_compute_time"));
  }
  SECTION("unterminated list") {
    REQUIRE_THROWS_WITH(
        parse("node1 -- Split -- forward_compute_time=1, "
              "backward_compute_time=1, activation_size=[1.0; 2.0, "
              "parameter_size=0\n"),
        Catch::Contains("graph.txt:1: activation_size: unterminated list"));
  }
  SECTION("duplicate node") {
    REQUIRE_THROWS_WITH(parse(node("node1") + node("node1")),
                        Catch::Contains("graph.txt:2: node node1 is defined "
                                        "twice (first on line 1)"));
  }
  SECTION("edge to an unknown node") {
    REQUIRE_THROWS_WITH(parse(node("node1") + "\tnode1 -- node9\n"),
                        Catch::Contains("graph.txt:2: edge names unknown node "
                                        "node9"));
  }
  SECTION("self-loop") {
    REQUIRE_THROWS_WITH(parse(node("node1") + "node1 -- node1\n"),
                        Catch::Contains("graph.txt:2: edge from node1 to "
                                        "itself"));
  }
  SECTION("empty file") {
    REQUIRE_THROWS_WITH(parse("\n\n"), Catch::Contains("graph.txt: no nodes"));
  }
}

TEST_CASE("graphs that are not chains are rejected naming the node") {
  std::string three = node("node1") + node("node2") + node("node3");
  SECTION("branch") {
    REQUIRE_THROWS_WITH(
        parse(three + "node1 -- node2\nnode1 -- node3\n"),
        Catch::Contains("node node1 has several successors (node2, node3; "
                        "line 5)") &&
            Catch::Contains("not a chain"));
  }
  SECTION("join") {
    REQUIRE_THROWS_WITH(
        parse(three + "node1 -- node3\nnode2 -- node3\n"),
        Catch::Contains("node node3 has several predecessors (node1, node2"));
  }
  SECTION("two sources") {
    REQUIRE_THROWS_WITH(parse(three + "node1 -- node2\n"),
                        Catch::Contains("nodes node1 and node3 both have no "
                                        "predecessor"));
  }
  SECTION("cycle") {
    REQUIRE_THROWS_WITH(
        parse(three + "node1 -- node2\nnode2 -- node3\nnode3 -- node1\n"),
        Catch::Contains("no source node: the edges form a cycle"));
  }
  SECTION("cycle beside the chain") {
    REQUIRE_THROWS_WITH(
        parse(three + node("node4") +
              "node1 -- node2\nnode3 -- node4\nnode4 -- node3\n"),
        Catch::Contains("node node3 is on a cycle, unreachable from node1"));
  }
}

TEST_CASE("loading graph.txt from a file") {
  std::string path = std::string(ASTEROID_TEST_TMP) + "/pipedream_graph.txt";
  {
    std::ofstream out(path);
    out << small_graph;
  }
  pipedream_import_options opt;
  opt.batch_size = 32;
  auto p = load_pipedream_graph(path, opt);
  CHECK(p.num_layers() == 3);

  {
    std::ofstream out(path);
    out << node("node1") << "node1 -- node2\n";
  }
  REQUIRE_THROWS_WITH(load_pipedream_graph(path, opt),
                      Catch::Contains(path + ":2: edge names unknown node"));
  REQUIRE_THROWS_WITH(load_pipedream_graph("/nonexistent/graph.txt", opt),
                      Catch::Contains("/nonexistent/graph.txt: cannot open"));
}
