#include "asteroid/actors/job_state.hpp"

#include <array>

namespace asteroid::actors {

namespace {

constexpr std::array<const char*, 7> names{
  "idle", "connecting", "deploying", "running", "recovering", "finished", "failed"};

} // namespace

const char* to_string(job_state s) {
  return names[static_cast<size_t>(s)];
}

std::optional<job_state> job_state_from_string(const std::string& name) {
  for (size_t i = 0; i < names.size(); ++i)
    if (name == names[i])
      return static_cast<job_state>(i);
  return std::nullopt;
}

bool allowed_transition(job_state from, job_state to) {
  using s = job_state;
  if (is_final(from) || from == to)
    return false;
  // Every live state can end: a job fails wherever it is, and a stop
  // finishes it wherever it is (before start: with no step run).
  if (is_final(to))
    return true;
  switch (from) {
    case s::idle:
      return to == s::connecting;
    case s::connecting:
      return to == s::deploying;
    case s::deploying:
      return to == s::running;
    case s::running:
      return to == s::recovering;
    case s::recovering:
      return to == s::running;
    default:
      return false;
  }
}

} // namespace asteroid::actors
