#include "asteroid/planner/json_io.hpp"
#include "asteroid/planner/schedule.hpp"
#include "asteroid/planner/schedule_check.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

using namespace asteroid::planner;

namespace {

std::vector<std::string> lines(const std::vector<instruction>& instrs) {
  std::vector<std::string> out;
  for (const auto& in : instrs)
    out.push_back(to_string(in));
  return out;
}

using golden = std::vector<std::vector<std::string>>;

void check_golden(const schedule& sched, int micro_batches,
                  const golden& expected) {
  int num_stages = static_cast<int>(expected.size());
  for (int s = 0; s < num_stages; ++s) {
    INFO("stage " << s << " of " << num_stages << ", M=" << micro_batches);
    CHECK(lines(sched.stream(s, num_stages, micro_batches)) == expected[s]);
  }
}

// One device per stage unless `replicas` says otherwise.
plan make_plan(int num_stages, int micro_batches,
               std::vector<int> replicas = {}) {
  plan p;
  p.planner = "test";
  p.micro_batches = micro_batches;
  p.batch_size = 4 * micro_batches;
  int device = 0;
  for (int s = 0; s < num_stages; ++s) {
    stage_plan st;
    st.first_layer = s;
    st.end_layer = s + 1;
    int n = replicas.empty() ? 1 : replicas[s];
    for (int r = 0; r < n; ++r) {
      st.devices.push_back(device++);
      st.shares.push_back(r == 0 ? 4 - (n - 1) : 1);
    }
    p.stages.push_back(st);
  }
  return p;
}

// Largest number of micro-batches forwarded but not yet backwarded.
int peak_in_flight(const std::vector<instruction>& instrs) {
  int now = 0, peak = 0;
  for (const auto& in : instrs) {
    if (in.kind == op::forward)
      peak = std::max(peak, ++now);
    if (in.kind == op::backward)
      --now;
  }
  return peak;
}

} // namespace

// The golden streams below were written by hand from the 1F1B rule (stage s:
// min(P-s-1, M) warm-up forwards, then F/B pairs, then the remaining B's),
// not printed by the code under test.
TEST_CASE("1F1B golden stream, 2 stages x 4 micro-batches") {
  check_golden(one_f_one_b_schedule{}, 4,
               {{"LOAD mb=0", "FWD mb=0", "SEND_ACT mb=0 to=s1",
                 "LOAD mb=1", "FWD mb=1", "SEND_ACT mb=1 to=s1",
                 "RECV_GRAD mb=0 from=s1", "BWD mb=0",
                 "LOAD mb=2", "FWD mb=2", "SEND_ACT mb=2 to=s1",
                 "RECV_GRAD mb=1 from=s1", "BWD mb=1",
                 "LOAD mb=3", "FWD mb=3", "SEND_ACT mb=3 to=s1",
                 "RECV_GRAD mb=2 from=s1", "BWD mb=2",
                 "RECV_GRAD mb=3 from=s1", "BWD mb=3",
                 "ALLREDUCE", "STEP"},
                {"LOAD mb=0", "RECV_ACT mb=0 from=s0", "FWD mb=0",
                 "BWD mb=0", "SEND_GRAD mb=0 to=s0",
                 "LOAD mb=1", "RECV_ACT mb=1 from=s0", "FWD mb=1",
                 "BWD mb=1", "SEND_GRAD mb=1 to=s0",
                 "LOAD mb=2", "RECV_ACT mb=2 from=s0", "FWD mb=2",
                 "BWD mb=2", "SEND_GRAD mb=2 to=s0",
                 "LOAD mb=3", "RECV_ACT mb=3 from=s0", "FWD mb=3",
                 "BWD mb=3", "SEND_GRAD mb=3 to=s0",
                 "ALLREDUCE", "STEP"}});
}

TEST_CASE("1F1B golden stream, 3 stages x 3 micro-batches") {
  check_golden(one_f_one_b_schedule{}, 3,
               {{"LOAD mb=0", "FWD mb=0", "SEND_ACT mb=0 to=s1",
                 "LOAD mb=1", "FWD mb=1", "SEND_ACT mb=1 to=s1",
                 "LOAD mb=2", "FWD mb=2", "SEND_ACT mb=2 to=s1",
                 "RECV_GRAD mb=0 from=s1", "BWD mb=0",
                 "RECV_GRAD mb=1 from=s1", "BWD mb=1",
                 "RECV_GRAD mb=2 from=s1", "BWD mb=2",
                 "ALLREDUCE", "STEP"},
                {"RECV_ACT mb=0 from=s0", "FWD mb=0", "SEND_ACT mb=0 to=s2",
                 "RECV_ACT mb=1 from=s0", "FWD mb=1", "SEND_ACT mb=1 to=s2",
                 "RECV_GRAD mb=0 from=s2", "BWD mb=0", "SEND_GRAD mb=0 to=s0",
                 "RECV_ACT mb=2 from=s0", "FWD mb=2", "SEND_ACT mb=2 to=s2",
                 "RECV_GRAD mb=1 from=s2", "BWD mb=1", "SEND_GRAD mb=1 to=s0",
                 "RECV_GRAD mb=2 from=s2", "BWD mb=2", "SEND_GRAD mb=2 to=s0",
                 "ALLREDUCE", "STEP"},
                {"LOAD mb=0", "RECV_ACT mb=0 from=s1", "FWD mb=0",
                 "BWD mb=0", "SEND_GRAD mb=0 to=s1",
                 "LOAD mb=1", "RECV_ACT mb=1 from=s1", "FWD mb=1",
                 "BWD mb=1", "SEND_GRAD mb=1 to=s1",
                 "LOAD mb=2", "RECV_ACT mb=2 from=s1", "FWD mb=2",
                 "BWD mb=2", "SEND_GRAD mb=2 to=s1",
                 "ALLREDUCE", "STEP"}});
}

TEST_CASE("1F1B golden stream, 4 stages x 2 micro-batches (M < P)") {
  check_golden(one_f_one_b_schedule{}, 2,
               {// s0: warm-up min(3, 2) = 2, no steady phase
                {"LOAD mb=0", "FWD mb=0", "SEND_ACT mb=0 to=s1",
                 "LOAD mb=1", "FWD mb=1", "SEND_ACT mb=1 to=s1",
                 "RECV_GRAD mb=0 from=s1", "BWD mb=0",
                 "RECV_GRAD mb=1 from=s1", "BWD mb=1",
                 "ALLREDUCE", "STEP"},
                // s1: warm-up min(2, 2) = 2
                {"RECV_ACT mb=0 from=s0", "FWD mb=0", "SEND_ACT mb=0 to=s2",
                 "RECV_ACT mb=1 from=s0", "FWD mb=1", "SEND_ACT mb=1 to=s2",
                 "RECV_GRAD mb=0 from=s2", "BWD mb=0", "SEND_GRAD mb=0 to=s0",
                 "RECV_GRAD mb=1 from=s2", "BWD mb=1", "SEND_GRAD mb=1 to=s0",
                 "ALLREDUCE", "STEP"},
                // s2: warm-up 1, one F/B pair, one cool-down B
                {"RECV_ACT mb=0 from=s1", "FWD mb=0", "SEND_ACT mb=0 to=s3",
                 "RECV_ACT mb=1 from=s1", "FWD mb=1", "SEND_ACT mb=1 to=s3",
                 "RECV_GRAD mb=0 from=s3", "BWD mb=0", "SEND_GRAD mb=0 to=s1",
                 "RECV_GRAD mb=1 from=s3", "BWD mb=1", "SEND_GRAD mb=1 to=s1",
                 "ALLREDUCE", "STEP"},
                {"LOAD mb=0", "RECV_ACT mb=0 from=s2", "FWD mb=0",
                 "BWD mb=0", "SEND_GRAD mb=0 to=s2",
                 "LOAD mb=1", "RECV_ACT mb=1 from=s2", "FWD mb=1",
                 "BWD mb=1", "SEND_GRAD mb=1 to=s2",
                 "ALLREDUCE", "STEP"}});
}

TEST_CASE("1F1B golden stream, 1 stage x 3 micro-batches") {
  // The only stage is first and last: it loads once per micro-batch.
  check_golden(one_f_one_b_schedule{}, 3,
               {{"LOAD mb=0", "FWD mb=0", "BWD mb=0",
                 "LOAD mb=1", "FWD mb=1", "BWD mb=1",
                 "LOAD mb=2", "FWD mb=2", "BWD mb=2",
                 "ALLREDUCE", "STEP"}});
}

TEST_CASE("GPipe golden stream, 3 stages x 2 micro-batches") {
  check_golden(gpipe_schedule{}, 2,
               {{"LOAD mb=0", "FWD mb=0", "SEND_ACT mb=0 to=s1",
                 "LOAD mb=1", "FWD mb=1", "SEND_ACT mb=1 to=s1",
                 "RECV_GRAD mb=1 from=s1", "BWD mb=1",
                 "RECV_GRAD mb=0 from=s1", "BWD mb=0",
                 "ALLREDUCE", "STEP"},
                {"RECV_ACT mb=0 from=s0", "FWD mb=0", "SEND_ACT mb=0 to=s2",
                 "RECV_ACT mb=1 from=s0", "FWD mb=1", "SEND_ACT mb=1 to=s2",
                 "RECV_GRAD mb=1 from=s2", "BWD mb=1", "SEND_GRAD mb=1 to=s0",
                 "RECV_GRAD mb=0 from=s2", "BWD mb=0", "SEND_GRAD mb=0 to=s0",
                 "ALLREDUCE", "STEP"},
                {"LOAD mb=0", "RECV_ACT mb=0 from=s1", "FWD mb=0",
                 "LOAD mb=1", "RECV_ACT mb=1 from=s1", "FWD mb=1",
                 "BWD mb=1", "SEND_GRAD mb=1 to=s1",
                 "BWD mb=0", "SEND_GRAD mb=0 to=s1",
                 "ALLREDUCE", "STEP"}});
}

TEST_CASE("printing a stream: one owner-prefixed instruction per line") {
  instruction_stream s{1, 0, 7,
                       {{op::recv_activation, 2, 0}, {op::forward, 2, -1},
                        {op::send_activation, 2, 2}, {op::all_reduce, -1, -1},
                        {op::optimizer_step, -1, -1}}};
  CHECK(to_string(s) ==
        "s1r0: RECV_ACT mb=2 from=s0\n"
        "s1r0: FWD mb=2\n"
        "s1r0: SEND_ACT mb=2 to=s2\n"
        "s1r0: ALLREDUCE\n"
        "s1r0: STEP\n");
  CHECK(to_compact_string(s) == "s1r0: F2 AR STEP");
}

TEST_CASE("compact 1F1B overview for 3 stages x 4 micro-batches") {
  auto streams = compile_schedule(make_plan(3, 4), schedule_kind::one_f_one_b);
  REQUIRE(streams.size() == 3);
  CHECK(to_compact_string(streams[0]) ==
        "s0r0: F0 F1 F2 B0 F3 B1 B2 B3 AR STEP");
  CHECK(to_compact_string(streams[1]) ==
        "s1r0: F0 F1 B0 F2 B1 F3 B2 B3 AR STEP");
  CHECK(to_compact_string(streams[2]) ==
        "s2r0: F0 B0 F1 B1 F2 B2 F3 B3 AR STEP");
}

TEST_CASE("every schedule is valid and deadlock-free for P 1..6, M 1..12") {
  for (const auto& name : {std::string("1f1b"), std::string("gpipe")}) {
    const auto& sched = find_schedule(name);
    for (int p = 1; p <= 6; ++p) {
      for (int m = 1; m <= 12; ++m) {
        INFO(name << " P=" << p << " M=" << m);
        // Uneven groups exercise the merge/split of the checker.
        std::vector<int> replicas;
        for (int s = 0; s < p; ++s)
          replicas.push_back(1 + (s * 2 + m) % 3);
        for (const auto& pl : {make_plan(p, m), make_plan(p, m, replicas)}) {
          auto streams = compile_schedule(pl, sched);
          schedule_check_report report;
          REQUIRE_NOTHROW(report = check_schedule(streams, m));
          size_t total = 0;
          for (const auto& s : streams)
            total += s.instructions.size();
          CHECK(report.instructions == static_cast<int>(total));
          for (const auto& s : streams) {
            int peak = peak_in_flight(s.instructions);
            if (name == "1f1b")
              CHECK(peak == std::min(p - s.stage, m));
            else
              CHECK(peak == m);
          }
        }
      }
    }
  }
}

TEST_CASE("1F1B needs asynchronous sends, GPipe does not") {
  // With blocking sends, stage 0 sends mb=1's activation while stage 1 sends
  // mb=0's gradient: each waits for the other. The runtime's mailboxes make
  // sends asynchronous, which is the semantics the schedules are built for.
  auto one_f = compile_schedule(make_plan(2, 2), schedule_kind::one_f_one_b);
  REQUIRE_THROWS_WITH(check_schedule(one_f, 2, send_semantics::rendezvous),
                      Catch::Contains("deadlock") &&
                          Catch::Contains("s0r0 waits at 5 (SEND_ACT mb=1") &&
                          Catch::Contains("s1r0 waits at 4 (SEND_GRAD mb=0"));
  for (int p = 1; p <= 5; ++p)
    for (int m = 1; m <= 8; ++m)
      CHECK_NOTHROW(check_schedule(
          compile_schedule(make_plan(p, m, std::vector<int>(p, 2)),
                           schedule_kind::gpipe),
          m, send_semantics::rendezvous));
}

TEST_CASE("the checker finds deadlocks and bad streams") {
  auto streams = compile_schedule(make_plan(2, 2), schedule_kind::one_f_one_b);
  auto& s0 = streams[0].instructions;

  SECTION("stage 0 waits for a gradient before sending the activation") {
    // LOAD0 FWD0 SEND_ACT0 RECV_GRAD0 BWD0 -> LOAD0 FWD0 RECV_GRAD0 SEND_ACT0
    // BWD0: structurally fine, but stage 1 never gets its input.
    auto one = compile_schedule(make_plan(2, 1), schedule_kind::one_f_one_b);
    auto& first = one[0].instructions;
    REQUIRE(first[2].kind == op::send_activation);
    std::swap(first[2], first[3]);
    REQUIRE_THROWS_WITH(check_schedule(one, 1),
                        Catch::Contains("deadlock") &&
                            Catch::Contains("s0r0 waits at 2 (RECV_GRAD mb=0 "
                                            "from=s1)") &&
                            Catch::Contains("s1r0 waits at 1 (RECV_ACT mb=0"));
  }
  SECTION("receives in a different order than sent") {
    auto g = compile_schedule(make_plan(2, 2), schedule_kind::gpipe);
    auto& s1 = g[1].instructions;
    // s1: LOAD0 RECV0 FWD0 LOAD1 RECV1 FWD1 ... -> swap the micro-batches of
    // the first two forwards (loads, receives, forwards).
    for (int i : {0, 1, 2})
      std::swap(s1[i].micro_batch, s1[i + 3].micro_batch);
    REQUIRE_THROWS_WITH(check_schedule(g, 2),
                        Catch::Contains("s1r0 instruction 1") &&
                            Catch::Contains("delivers mb=0 first"));
  }
  SECTION("a missing backward") {
    s0.erase(std::find(s0.begin(), s0.end(), instruction{op::backward, 1, -1}));
    REQUIRE_THROWS_WITH(check_schedule(streams, 2),
                        Catch::Contains("s0r0") && Catch::Contains("no BWD of mb=1"));
  }
  SECTION("a micro-batch forwarded twice") {
    s0.insert(s0.begin() + 2, instruction{op::forward, 0, -1});
    REQUIRE_THROWS_WITH(check_schedule(streams, 2),
                        Catch::Contains("second FWD of mb=0"));
  }
  SECTION("a backward before its forward") {
    auto& s1 = streams[1].instructions;
    // LOAD0 RECV0 FWD0 BWD0 ... -> BWD0 first
    std::swap(s1[2], s1[3]);
    REQUIRE_THROWS_WITH(check_schedule(streams, 2),
                        Catch::Contains("s1r0") &&
                            Catch::Contains("backward before forward of mb=0"));
  }
  SECTION("a send to the wrong stage") {
    s0[2].peer_stage = 0;
    REQUIRE_THROWS_WITH(check_schedule(streams, 2),
                        Catch::Contains("s0r0 instruction 2") &&
                            Catch::Contains("peer must be s1"));
  }
  SECTION("no optimizer step at the end") {
    s0.pop_back();
    REQUIRE_THROWS_WITH(check_schedule(streams, 2), Catch::Contains("no STEP"));
  }
  SECTION("all-reduce not second to last") {
    std::swap(s0[s0.size() - 1], s0[s0.size() - 2]);
    REQUIRE_THROWS_WITH(check_schedule(streams, 2),
                        Catch::Contains("must end with ALLREDUCE then STEP"));
  }
  SECTION("a micro-batch out of range") {
    REQUIRE_THROWS_WITH(check_schedule(streams, 1),
                        Catch::Contains("micro-batch out of range [0, 1)"));
  }
}

TEST_CASE("replicas of a stage run the same stream on their own devices") {
  auto p = make_plan(3, 2, {2, 1, 3});
  auto streams = compile_schedule(p, schedule_kind::one_f_one_b);
  REQUIRE(streams.size() == 6);
  CHECK(streams[0].stage == 0);
  CHECK(streams[1].replica == 1);
  CHECK(streams[1].device == 1);
  CHECK(streams[2].stage == 1);
  CHECK(streams[5].stage == 2);
  CHECK(streams[5].replica == 2);
  CHECK(streams[5].device == 5);
  CHECK(streams[3].instructions == streams[5].instructions);
}

TEST_CASE("format_schedule prints headers, overview and instructions") {
  auto p = make_plan(2, 2, {2, 1});
  auto text = format_schedule(p, schedule_kind::one_f_one_b);
  CHECK_THAT(text, Catch::StartsWith(
                       "# schedule 1f1b: 2 stages, 2 micro-batches of 4 "
                       "samples\n# stage 0: layers [0, 1), replicas r0=device 0 "
                       "(3 samples), r1=device 1 (1 samples)\n"));
  CHECK_THAT(text, Catch::Contains("# s0r0: F0 F1 B0 B1 AR STEP\n"));
  CHECK_THAT(text, Catch::Contains("s1r0: SEND_GRAD mb=1 to=s0\n"));
  CHECK_THAT(text, !Catch::Contains("s0r1:"));
  CHECK_THAT(format_schedule(p, schedule_kind::gpipe, true),
             Catch::Contains("s0r1: RECV_GRAD mb=1 from=s1\n"));
}

namespace {

// GPipe with backwards in forward order: a user-defined schedule.
class fifo_gpipe : public schedule {
public:
  std::string name() const override { return "test-fifo-gpipe"; }
  std::vector<instruction> stream(int stage, int num_stages,
                                  int micro_batches) const override {
    auto out = gpipe_schedule{}.stream(stage, num_stages, micro_batches);
    // Re-sort the backward part (each backward with its receive and send).
    std::vector<instruction> fwd, bwd;
    for (const auto& in : out)
      if (in.kind == op::backward || in.kind == op::recv_grad ||
          in.kind == op::send_grad)
        bwd.push_back(in);
      else if (in.kind != op::all_reduce && in.kind != op::optimizer_step)
        fwd.push_back(in);
    std::stable_sort(bwd.begin(), bwd.end(), [](const auto& a, const auto& b) {
      return a.micro_batch < b.micro_batch;
    });
    fwd.insert(fwd.end(), bwd.begin(), bwd.end());
    fwd.push_back({op::all_reduce, -1, -1});
    fwd.push_back({op::optimizer_step, -1, -1});
    return fwd;
  }
};

} // namespace

TEST_CASE("schedule registry") {
  CHECK(find_schedule("1f1b").name() == "1f1b");
  CHECK(find_schedule(schedule_kind::gpipe).name() == "gpipe");
  CHECK(parse_schedule_kind("gpipe") == schedule_kind::gpipe);
  CHECK(to_string(schedule_kind::one_f_one_b) == "1f1b");
  REQUIRE_THROWS_WITH(find_schedule("zero-bubble"),
                      Catch::Contains("unknown schedule 'zero-bubble'") &&
                          Catch::Contains("1f1b, gpipe"));
  REQUIRE_THROWS_WITH(parse_schedule_kind("2f2b"),
                      Catch::Contains("unknown schedule '2f2b'"));

  static bool registered = false;
  if (!registered) {
    register_schedule(std::make_shared<fifo_gpipe>());
    registered = true;
  }
  const auto& custom = find_schedule("test-fifo-gpipe");
  auto names = schedule_names();
  CHECK(std::find(names.begin(), names.end(), "test-fifo-gpipe") != names.end());
  auto streams = compile_schedule(make_plan(3, 4), custom);
  CHECK(to_compact_string(streams[1]) ==
        "s1r0: F0 F1 F2 F3 B0 B1 B2 B3 AR STEP");
  CHECK_NOTHROW(check_schedule(streams, 4));
  REQUIRE_THROWS_WITH(register_schedule(std::make_shared<gpipe_schedule>()),
                      Catch::Contains("'gpipe' is already registered"));
}

TEST_CASE("instructions travel as JSON and parse back to the same stream") {
  for (size_t i = 0; i < num_ops; ++i) {
    auto kind = static_cast<op>(i);
    CHECK(parse_op(to_string(kind)) == kind);
  }
  REQUIRE_THROWS_WITH(parse_op("JUMP"),
                      Catch::Contains("unknown instruction 'JUMP'") &&
                          Catch::Contains("LOAD, FWD, SEND_ACT"));
  for (auto kind : {schedule_kind::one_f_one_b, schedule_kind::gpipe})
    for (const auto& s : compile_schedule(make_plan(3, 4), kind)) {
      nlohmann::json j = s.instructions;
      CHECK(parse_instructions(j, "stream") == s.instructions);
    }
  nlohmann::json send = instruction{op::send_activation, 2, 1};
  CHECK(send.dump() == R"({"mb":2,"op":"SEND_ACT","peer":1})");
  nlohmann::json step = instruction{op::optimizer_step, -1, -1};
  CHECK(step.dump() == R"({"op":"STEP"})");
  auto bad = [](const char* text) {
    return parse_instructions(nlohmann::json::parse(text), "stream");
  };
  REQUIRE_THROWS_WITH(bad(R"([{"op": "FWD", "mb": 0}, {"op": 3}])"),
                      Catch::Contains("stream: [1].op: expected a string"));
  REQUIRE_THROWS_WITH(bad(R"([{"op": "FWD", "mb": -7}])"),
                      Catch::Contains("[0].mb: out of range: -7"));
  REQUIRE_THROWS_WITH(bad(R"([{"op": "FWD", "micro_batch": 0}])"),
                      Catch::Contains("[0].micro_batch: unknown field"));
  REQUIRE_THROWS_WITH(bad(R"({"op": "FWD"})"),
                      Catch::Contains("stream: expected an array"));
}

TEST_CASE("check_stream checks one replica's stream without its peers") {
  auto streams = compile_schedule(make_plan(3, 4), schedule_kind::one_f_one_b);
  for (const auto& s : streams)
    CHECK_NOTHROW(check_stream(s, 3, 4));
  auto s1 = streams[1];
  // A stream from another pipeline: its peers do not exist here.
  REQUIRE_THROWS_WITH(check_stream(s1, 1, 4),
                      Catch::Contains("stage out of range [0, 1)"));
  // More micro-batches than the replica has rows for.
  REQUIRE_THROWS_WITH(check_stream(s1, 3, 2),
                      Catch::Contains("micro-batch out of range [0, 2)"));
  auto skipped = s1;
  skipped.instructions.erase(skipped.instructions.begin()); // first RECV_ACT
  REQUIRE_THROWS_WITH(check_stream(skipped, 3, 4),
                      Catch::Contains("s1r0") && Catch::Contains("no RECV_ACT of mb=0"));
  auto wrong_peer = s1;
  for (auto& in : wrong_peer.instructions)
    if (in.kind == op::send_activation) {
      in.peer_stage = 0;
      break;
    }
  REQUIRE_THROWS_WITH(check_stream(wrong_peer, 3, 4),
                      Catch::Contains("peer must be s2"));
}
