#pragma once
// Which job a node serves and whose word it takes: a node serves one job at
// a time, named by the random id its supervisor drew (`draw_job_id`). While a
// job holds the node, control messages act only when they come from the
// claimant's process (the supervisor and its stage actors) or from this
// node's own process (its replicas, its builder); tensors, snapshots among
// them, only when they name the job. Between jobs everyone may ask (probes
// and profiles before a job, `asteroid probe`).
//
// What this does not do: prove who a peer is. CAF's node identity and the
// job id travel in clear until the transport is authenticated, so this
// keeps the owner's jobs apart, not a determined stranger out.
#include "asteroid/serialization/tensor_message.hpp"

#include <caf/all.hpp>

#include <cstdint>

#include <string>

namespace asteroid::actors::detail {

class job_claim {
public:
  job_claim() = default;
  /// `home`: this node's own process, whose actors are always obeyed.
  explicit job_claim(caf::node_id home) : home_(std::move(home)) {}

  /// Takes the node for `job`, whose snapshot versions never exceed
  /// `max_version`, for `claimant`. Returns "" or why not (another job
  /// holds it; a bad id). Taking it again for the same job updates the
  /// claimant and the bound.
  std::string take(int64_t job, int64_t max_version,
                   const caf::strong_actor_ptr& claimant);
  /// Frees the node if `job` holds it; true if it did.
  bool release(int64_t job);
  /// Frees the node if `who` is its claimant (gone: its process died or
  /// the job ended); true if it was.
  bool claimant_down(const caf::actor_addr& who);

  bool held() const { return job_ != 0; }
  /// The job served; 0 when free.
  int64_t job() const { return job_; }
  const caf::actor_addr& claimant() const { return claimant_; }
  /// The claimant's process: its supervisor and stage actors.
  const caf::node_id& owner() const { return owner_; }

  /// "" when a control message from `sender` may act, else why not.
  std::string obeys(const caf::strong_actor_ptr& sender) const;
  /// "" when a tensor message may be kept or answered, else why not: it
  /// names another job, or a snapshot version the job cannot have reached.
  std::string admits(const serialization::tensor_identity& m) const;

  /// "job <id>" or "no job", for logs and refusals.
  std::string describe() const;

private:
  caf::node_id home_;
  int64_t job_ = 0;
  int64_t max_version_ = 0;
  caf::node_id owner_;
  caf::actor_addr claimant_;
};

/// A fresh job id: 63 random bits from the system's entropy source, never 0.
int64_t draw_job_id();

} // namespace asteroid::actors::detail
