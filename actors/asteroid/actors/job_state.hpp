#pragma once
/// \file
/// The states of a job as its supervisor actor reports them, and the
/// transitions between them. Pure: no CAF, so the rules are testable alone.
///
///     idle -> connecting -> deploying -> running <-> recovering
///                  \______________\__________\___________\___> finished | failed
///
/// `idle` until the program sends start; `connecting` while the nodes are
/// reached and asked for their capabilities (and links measured);
/// `deploying` while the first plan is made and its replicas are built;
/// `running` while steps run; `recovering` from a detected loss, a re-plan,
/// a re-admitted node or a removed one until the next generation is
/// deployed. `finished`
/// (all steps, or stopped by request) and `failed` are final.
#include <cstdint>
#include <optional>
#include <string>

namespace asteroid::actors {

enum class job_state : int32_t {
  idle,
  connecting,
  deploying,
  running,
  recovering,
  finished,
  failed,
};

/// "idle", "connecting", ...
const char* to_string(job_state s);
/// The state named `name` (as to_string writes it), if any.
std::optional<job_state> job_state_from_string(const std::string& name);

/// Whether a job may go from `from` to `to`.
bool allowed_transition(job_state from, job_state to);

inline bool is_final(job_state s) {
  return s == job_state::finished || s == job_state::failed;
}

/// The current state, changed only along allowed transitions.
class job_state_machine {
public:
  job_state state() const { return state_; }

  /// Moves to `to` and returns true, or returns false and stays where it is
  /// when the transition is not allowed (a final state never changes).
  bool advance(job_state to) {
    if (!allowed_transition(state_, to))
      return false;
    state_ = to;
    return true;
  }

private:
  job_state state_ = job_state::idle;
};

} // namespace asteroid::actors
