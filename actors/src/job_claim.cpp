#include "job_claim.hpp"

#include <random>

namespace asteroid::actors::detail {

std::string job_claim::take(int64_t job, int64_t max_version,
                            const caf::strong_actor_ptr& claimant) {
  if (job <= 0)
    return "job id " + std::to_string(job) + " is not a job (ids are > 0)";
  if (max_version < 0)
    return "job " + std::to_string(job) + ": last step "
           + std::to_string(max_version) + " is negative";
  if (!claimant)
    return "job " + std::to_string(job) + ": a claim needs a sender to answer to";
  if (held() && job_ != job)
    return "busy with another job (" + describe() + ")";
  job_ = job;
  max_version_ = max_version;
  owner_ = claimant->node();
  claimant_ = claimant->address();
  return {};
}

bool job_claim::release(int64_t job) {
  if (!held() || job != job_)
    return false;
  *this = job_claim{home_};
  return true;
}

bool job_claim::claimant_down(const caf::actor_addr& who) {
  if (!held() || who != claimant_)
    return false;
  *this = job_claim{home_};
  return true;
}

std::string job_claim::obeys(const caf::strong_actor_ptr& sender) const {
  if (!held())
    return {};
  if (!sender)
    return "an anonymous message while serving " + describe();
  if (sender->node() == owner_ || sender->node() == home_)
    return {};
  return "a message from process " + to_string(sender->node())
         + ", which does not run " + describe();
}

std::string job_claim::admits(const serialization::tensor_identity& m) const {
  if (m.kind == serialization::tensor_kind::snapshot && !held())
    return "a snapshot while serving no job";
  if (m.job != job_)
    return serialization::to_string(m.kind) + " of job " + std::to_string(m.job)
           + " while serving " + describe();
  if (m.kind == serialization::tensor_kind::snapshot
      && (m.step < 0 || m.step > max_version_))
    return "snapshot version " + std::to_string(m.step) + " beyond the "
           + std::to_string(max_version_) + " steps of " + describe();
  return {};
}

int64_t draw_job_id() {
  std::random_device entropy; // /dev/urandom with glibc
  for (;;) {
    auto bits = (static_cast<uint64_t>(entropy()) << 32) ^ entropy();
    auto id = static_cast<int64_t>(bits >> 1);
    if (id != 0)
      return id;
  }
}

std::string job_claim::describe() const {
  return held() ? "job " + std::to_string(job_) : "no job";
}

} // namespace asteroid::actors::detail
