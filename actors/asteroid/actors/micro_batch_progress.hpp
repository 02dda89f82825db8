#pragma once
/// \file
/// Where one micro-batch of a step is: which replica holds which rows of it
/// at every stage (its route, fixed when the supervisor injects it) and which
/// of those pieces have finished their forward and backward pass. The state
/// of a micro-batch actor (micro_batch.hpp); pure, so it is testable alone.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace asteroid::actors {

/// The passes a replica reports for its piece of a micro-batch.
enum micro_batch_pass : int32_t {
  pass_forward = 0,
  pass_backward = 1,
};

/// Rows [begin, end) of the micro-batch, held by replica `replica` of a
/// stage, which runs on device `device` (named `node`).
struct micro_batch_piece {
  int32_t replica = 0;
  int32_t device = -1;
  std::string node;
  int64_t begin = 0;
  int64_t end = 0;
};

/// Which replica holds which piece at every stage. Replicas with no rows of
/// the micro-batch are not in it: they run no pass of it.
struct micro_batch_route {
  int64_t step = 0;
  int32_t micro_batch = 0;
  /// Per stage, its pieces.
  std::vector<std::vector<micro_batch_piece>> stages;
};

/// A route, and the passes reported so far.
class micro_batch_progress {
public:
  explicit micro_batch_progress(micro_batch_route route);

  /// Records that replica `replica` of stage `stage` finished `pass` of its
  /// piece. An empty string, or why the report was refused (no such piece,
  /// an unknown pass, or a report already made): a refused report changes
  /// nothing.
  std::string report(int32_t stage, int32_t replica, int32_t pass);

  /// Every piece has finished its backward pass: the micro-batch left the
  /// pipeline.
  bool finished() const { return remaining_ == 0; }

  /// Passes reported (and accepted) so far.
  int64_t reports() const { return reports_; }

  /// {"step", "micro_batch", "forward_done": [stages whose every piece
  /// finished forward], "backward_done": [...], "waiting": [the pieces of the
  /// first unfinished pass, forward from stage 0 then backward from the last
  /// stage: {"stage", "replica", "device", "node", "rows": [begin, end],
  /// "pass": "forward" | "backward"}], "finished"}.
  nlohmann::json where() const;

  const micro_batch_route& route() const { return route_; }

private:
  /// Where piece (stage, replica) is in `done_`, if the route has it.
  std::optional<size_t> index_of(int32_t stage, int32_t replica) const;
  bool stage_done(size_t stage, int32_t pass) const;

  micro_batch_route route_;
  /// Per piece (stages in order, pieces in order): the passes done, as bits.
  std::vector<uint8_t> done_;
  std::vector<size_t> first_piece_; ///< per stage, its first index in done_
  int64_t remaining_ = 0;           ///< backward passes still to come
  int64_t reports_ = 0;
};

} // namespace asteroid::actors
