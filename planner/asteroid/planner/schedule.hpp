#pragma once

#include "asteroid/planner/instruction.hpp"
#include "asteroid/planner/plan.hpp"

#include <memory>
#include <string>
#include <vector>

namespace asteroid::planner {

/// The pipeline schedules built into Asteroid.
enum class schedule_kind {
  /// Synchronous 1F1B (PipeDream-Flush / DeepSpeed `TrainSchedule`): stage s
  /// runs min(P-s-1, M) warm-up forwards, then alternates one forward and one
  /// backward, then drains the remaining backwards. At most P-s micro-batches
  /// are in flight on stage s.
  one_f_one_b,
  /// GPipe: all M forwards, then all M backwards in reverse order. All M
  /// micro-batches are in flight at once.
  gpipe,
};

/// Registry name of a kind: "1f1b" or "gpipe".
std::string to_string(schedule_kind kind);
/// Parses a registry name ("1f1b", "gpipe"); throws std::invalid_argument
/// naming the unknown schedule and the known ones.
schedule_kind parse_schedule_kind(const std::string& name);

/// A pipeline schedule: the instruction stream of every stage, as pure data.
///
/// A stream holds, for one mini-batch, exactly one `forward` and one
/// `backward` of every micro-batch, the sends and receives they need, and
/// ends with `all_reduce` and `optimizer_step`. Sends are asynchronous and
/// receives block (the actor runtime's mailboxes); `check_schedule` in
/// schedule_check.hpp verifies that a schedule cannot deadlock under these
/// semantics.
class schedule {
public:
  virtual ~schedule() = default;

  /// Registry name, e.g. "1f1b".
  virtual std::string name() const = 0;

  /// Instructions of stage `stage` (0-based) of a pipeline of `num_stages`
  /// stages running `micro_batches` micro-batches per mini-batch.
  virtual std::vector<instruction> stream(int stage, int num_stages,
                                          int micro_batches) const = 0;
};

/// Synchronous 1F1B, see `schedule_kind::one_f_one_b`.
class one_f_one_b_schedule : public schedule {
public:
  std::string name() const override;
  std::vector<instruction> stream(int stage, int num_stages,
                                  int micro_batches) const override;
};

/// GPipe, see `schedule_kind::gpipe`.
class gpipe_schedule : public schedule {
public:
  std::string name() const override;
  std::vector<instruction> stream(int stage, int num_stages,
                                  int micro_batches) const override;
};

/// Looks a schedule up by registry name; throws std::invalid_argument naming
/// the unknown schedule and the known ones.
const schedule& find_schedule(const std::string& name);
/// The schedule of a built-in kind.
const schedule& find_schedule(schedule_kind kind);
/// Adds a schedule under its `name()`; throws std::invalid_argument if the
/// name is taken. Not thread-safe: register at start-up.
void register_schedule(std::shared_ptr<const schedule> sched);
/// Registered names, sorted.
std::vector<std::string> schedule_names();

/// The streams of every replica of every stage of `p`, ordered by stage then
/// replica; replica r of stage s runs on `p.stages[s].devices[r]`. Throws
/// std::invalid_argument for a plan without stages, a stage without devices
/// or fewer than one micro-batch.
std::vector<instruction_stream> compile_schedule(const plan& p,
                                                 const schedule& sched);
std::vector<instruction_stream> compile_schedule(const plan& p,
                                                 schedule_kind kind);

/// Human-readable schedule of a whole plan (what `asteroid schedule` prints):
/// a header per stage, a one-line overview of each stage's compute order,
/// then one instruction per line (`s1r0: FWD mb=2`). Replicas of a stage run
/// identical streams, so only replica 0's lines are printed unless
/// `all_replicas` is set.
std::string format_schedule(const plan& p, const schedule& sched,
                            bool all_replicas = false);
std::string format_schedule(const plan& p, schedule_kind kind,
                            bool all_replicas = false);

} // namespace asteroid::planner
