// The device actor a node publishes: capabilities, heartbeats, deployments
// (through its replica builder), snapshots, link probes (the node's side),
// slowdowns, stop.
#include "asteroid/actors/node.hpp"

#include "asteroid/actors/channel.hpp"
#include "asteroid/actors/data_plane.hpp"
#include "asteroid/actors/inference_stage.hpp"
#include "asteroid/actors/job.hpp"
#include "asteroid/actors/replica.hpp"
#include "asteroid/actors/replica_footprint.hpp"
#include "asteroid/actors/snapshot_store.hpp"
#include "asteroid/actors/state_uploads.hpp"
#include "asteroid/kernels/compute_device.hpp"
#include "asteroid/kernels/cpu_threads.hpp"
#include "asteroid/planner/json_io.hpp"
#include "asteroid/training/model_registry.hpp"
#include "asteroid/training/profiler.hpp"
#include "job_claim.hpp"
#include "probe_timing.hpp"
#include "memory_hog.hpp"
#include "process_memory.hpp"
#include "unexpected.hpp"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <limits>
#include <map>
#include <memory>
#include <type_traits>
#include <unistd.h>
#include <cstdio>
#include <functional>
#include <stdexcept>
#include <thread>
#include <vector>

namespace asteroid::actors {

namespace {

/// The largest payload a link probe's answer carries: none (its size is in
/// `step`), with room to spare.
constexpr uint64_t max_echo_reply = 4096;

using detail::answers_echo;
using detail::fastest_round_trips;
using detail::max_probe_growths;
using detail::round_trips;
using detail::stream_seconds;

struct device_state {
  device_options opts;
  /// What `opts.compute_device` is (its name and memory, for `ast_caps`).
  kernels::device_info hardware;
  std::shared_ptr<data_plane> dp;
  std::vector<caf::actor> replicas;
  /// Builds the replicas deployed here (replica_builder), so that this
  /// actor keeps answering heartbeats meanwhile.
  replica_builder_actor builder;
  /// Deployments the builder works on, by number: answered when it is done.
  std::map<int64_t, caf::typed_response_promise<std::string, caf::actor>> deploying;
  /// Replicas of a generation below this one stop at their next op
  /// (`ast_halt`); shared with every replica built here.
  std::shared_ptr<std::atomic<int64_t>> halt_below
    = std::make_shared<std::atomic<int64_t>>(0);
  int64_t deploys = 0;
  /// The job served and whose word counts (job_claim.hpp).
  detail::job_claim claim;
  snapshot_store store;
  /// The job the snapshots in `store` belong to.
  int64_t store_job = 0;
  /// Stage states arriving in pieces for deployments to come (bounded by
  /// the node's memory budget: set in device_fun).
  state_uploads uploads{0};
  /// The snapshot a piecewise read is under way of: the held state, or the
  /// merge of held ranges made once for all its pieces.
  struct piecewise_read {
    std::string key;
    int64_t version = -1;
    snapshot_bytes bytes;
  } reading;
  /// Memory held for the job's `hog` fault, until the node is free again.
  std::shared_ptr<detail::memory_hog> hog = std::make_shared<detail::memory_hog>();
};

using device_self = device_actor::stateful_pointer<device_state>;

/// "" when the message being handled may act, else why not (logged).
std::string refusal(device_self self, const char* what) {
  auto why = self->state.claim.obeys(self->current_sender());
  if (!why.empty()) {
    why = self->state.opts.name + " refused " + what + ": " + why;
    spdlog::warn("{}", why);
  }
  return why;
}

/// The node serves no job: its data plane takes frames of none.
void free_node(device_self self, const std::string& why) {
  spdlog::info("{}: free again ({})", self->state.opts.name, why);
  self->state.hog->release();
  self->state.uploads.clear();
  self->state.reading = {};
  if (!self->state.dp)
    return;
  self->state.dp->serve_job(0);
  self->state.dp->on_unreachable(nullptr);
  // What the links went through, for whoever reads the node's log after a
  // job (counted since the node started).
  spdlog::info("{}: data plane so far: {}", self->state.opts.name,
               to_string(self->state.dp->stats()));
}

/// A peer this node's data plane gave up on is reported to the job that
/// holds the node (`ast_unrch`, endpoint, why), which treats the device
/// behind it as lost: a path between two nodes that fails for good while
/// both still answer heartbeats would otherwise stall the job until its
/// step timeout. Sent as the device (the supervisor knows who reports).
/// The callback holds both actors weakly: the device holds the data plane,
/// so a strong handle to it here would keep the device alive.
void tell_claimant_of_unreachable_peers(device_self self) {
  caf::actor_addr me = self->address();
  caf::actor_addr claimant = self->state.claim.claimant();
  self->state.dp->on_unreachable([me, claimant](const std::string& endpoint,
                                                const std::string& why) {
    auto from = caf::actor_cast<caf::actor>(me);
    auto to = caf::actor_cast<caf::actor>(claimant);
    if (from && to)
      caf::send_as(from, to, unreachable_atom::value, endpoint, why);
  });
}

/// Throws unless the node serves job `job` (the one a spec names).
void require_claim(device_self self, int64_t job) {
  const auto& claim = self->state.claim;
  if (job != claim.job() || !claim.held())
    throw std::invalid_argument("the spec names job " + std::to_string(job)
                                + "; this node serves " + claim.describe()
                                + " (claim it first: ast_claim)");
}

/// The held states that make up the snapshot of `key` at `version`: the
/// one held under that key, or the ranges held (a replica's own and a
/// neighbour's backup) that tile it; empty when the node holds neither.
/// Shared, not copied: what a read does with them (copy, merge) runs off the
/// device actor (`off_device`).
snapshot_parts held_parts(device_self self, const std::string& key, int64_t version) {
  if (auto whole = self->state.store.get(key, version))
    return {std::move(whole)};
  int first = 0, end = 0;
  if (!snapshot_store::parse_key(key, first, end))
    return {};
  return self->state.store.parts(first, end, version);
}

/// Asks a worker of a read to do its work (local only: no peer can send it).
using work_atom = caf::atom_constant<caf::atom("ast_work")>;

/// What a worker made: why it failed ("" when it did not), the bytes.
using work_outcome = std::pair<std::string, std::string>;

/// Runs `work` on a thread of its own and hands its outcome to `done` on the
/// device's thread. A snapshot read or copy merges held ranges (decoding and
/// encoding every tensor: 1.1-1.3 s for 126 MB on a 2-core host) or copies
/// the whole state, and a device actor that did that itself would answer no
/// heartbeat meanwhile: a supervisor would take the busy node for a lost
/// one (the same reason a restore is merged on the builder thread).
void off_device(device_self self, std::function<work_outcome()> work,
                std::function<void(std::string&, std::string&)> done) {
  auto worker = self->spawn<caf::detached>([work](caf::event_based_actor* w) -> caf::behavior {
    return {[=](work_atom) -> std::tuple<std::string, std::string> {
      w->quit();
      try {
        auto [err, bytes] = work();
        return {std::move(err), std::move(bytes)};
      } catch (const std::exception& e) {
        return {std::string{e.what()}, std::string{}};
      }
    }};
  });
  // Unbounded: the worker is in this process and always answers (its
  // exceptions are caught above); the peer that asked bounds its own wait.
  self->request(worker, caf::infinite, work_atom::value)
    .then([=](std::string& err, std::string& bytes) { done(err, bytes); },
          [=](caf::error& e) {
            auto err = "a snapshot worker failed: " + self->system().render(e);
            std::string none;
            done(err, none);
          });
}

/// The snapshot `parts` make up as one encoded state (a copy of the one, or
/// the merge of several), or why it could not be made.
work_outcome materialize(const snapshot_parts& parts, const std::string& node,
                         const std::string& key) {
  try {
    return {std::string{}, snapshot_store::merge(parts)};
  } catch (const std::exception& e) {
    return {node + " could not merge the snapshots it holds of " + key + ": " + e.what(),
            std::string{}};
  }
}

/// A spec's "state_upload": its state came before, in pieces, from the
/// same sender (`from`); moved into `state`. Throws naming what is missing.
void take_upload(device_self self, uint64_t from, const nlohmann::json& spec,
                 const std::string& label, std::string& state) {
  if (!spec.contains("state_upload"))
    return;
  std::string why;
  auto bytes = self->state.uploads.take({from, spec.at("state_upload").get<int64_t>()}, why);
  if (!bytes)
    throw std::invalid_argument(why);
  state = std::move(*bytes);
  spdlog::info("{}: deploying {} from a state of {} bytes sent in pieces",
               self->state.opts.name, label, state.size());
}

std::string no_snapshot(device_self self, const std::string& key, int64_t version) {
  return self->state.opts.name + " holds no snapshot " + key + " of version "
         + std::to_string(version);
}

/// Logs a failed deployment on device `name` and says why, for the supervisor.
std::string deploy_failure(const std::string& name, const std::string& why) {
  spdlog::error("{}: deploy failed: {}", name, why);
  return "deploy on " + name + ": " + why;
}

/// What a device hands its builder for one deployment: the spec, and the
/// encoded state or, for a replica restored from this node's snapshots, the
/// snapshots that make it up (merged by the builder).
struct build_input {
  std::string spec_json;
  std::string state;
  snapshot_parts parts;
};

/// Hands a deployment (`atom`: a replica or an inference stage) to the
/// device's builder and answers the asker when the builder is done.
/// `prepare` checks the request and returns the build_input the builder
/// gets; what it throws is the answer.
template <class Atom, class Prepare>
caf::typed_response_promise<std::string, caf::actor>
queue_build(device_self self, const char* what, Atom atom, Prepare prepare) {
  // Before the promise: making it takes the sender from the message.
  auto why = refusal(self, what);
  auto rp = self->make_response_promise<std::string, caf::actor>();
  if (!why.empty()) {
    rp.deliver(why, caf::actor{});
    return rp;
  }
  try {
    auto input = prepare();
    auto id = ++self->state.deploys;
    self->state.deploying.emplace(id, rp);
    if constexpr (std::is_same_v<Atom, deploy_atom>)
      if (!input.parts.empty()) {
        self->send(self->state.builder, atom, id, std::move(input.spec_json),
                   std::move(input.parts), self->state.claim.owner());
        return rp;
      }
    self->send(self->state.builder, atom, id, std::move(input.spec_json),
               std::move(input.state), self->state.claim.owner());
  } catch (const std::exception& e) {
    rp.deliver(deploy_failure(self->state.opts.name, e.what()), caf::actor{});
  }
  return rp;
}

/// Builds replicas for a device, one deployment after another, on a thread
/// that lives as long as the device: building a replica (the model, its
/// state) can take seconds on a small device, and a device actor that did
/// it itself would not answer heartbeats, so a supervisor that watches them
/// during a deployment would take a busy node for a hung one. One long-lived
/// thread, not one per deployment: a fresh thread made a recovery's
/// deployment 30-100 ms slower (fault_bench, replay). The device answers the
/// supervisor (its replies must come from the device it asked).
replica_builder_actor::behavior_type
replica_builder(replica_builder_actor::pointer self, caf::actor home,
                std::shared_ptr<data_plane> dp, std::string name,
                std::shared_ptr<const std::atomic<int64_t>> halt_below,
                int64_t memory_budget, std::string compute_device) {
  // The generation an inference stage is committed under.
  constexpr int inference_generation = -1;
  // What the replicas built here are predicted to hold, by replica, with
  // their deployment generation: a deployment is checked against the budget
  // left by the live replicas of its own generation (older ones are being
  // replaced or re-configured by the same deployment).
  struct committed_bytes {
    int generation;
    int64_t bytes;
  };
  auto committed = std::make_shared<std::map<caf::actor_addr, committed_bytes>>();
  self->set_down_handler(
    [committed](const caf::down_msg& dm) { committed->erase(dm.source); });
  using built = caf::result<adopt_atom, int64_t, std::string, caf::actor>;
  auto build_replica = [=](int64_t id, const std::string& spec_json,
                           const std::string& state,
                           const caf::node_id& supervisor_node) -> built {
    try {
      auto spec = replica_spec_from_json(nlohmann::json::parse(spec_json));
      // The node's own budget and device, whatever the deployment says.
      spec.memory_budget = memory_budget > 0 ? memory_budget : -1;
      spec.compute_device = compute_device;
      spec.memory_committed = 0;
      for (const auto& [addr, c] : *committed)
        if (c.generation == spec.generation)
          spec.memory_committed += c.bytes;
      replica_footprint footprint;
      auto r = spawn_replica(self->system(), spec, state,
                             caf::actor_cast<device_actor>(home), dp, halt_below,
                             supervisor_node, &footprint);
      committed->emplace(r.address(), committed_bytes{spec.generation, footprint.total()});
      self->monitor(r);
      spdlog::info("{}: deployed {} (layers [{}, {}), share {}), predicted {}", name,
                   spec.label, spec.first_layer, spec.end_layer,
                   spec.shares[spec.replica], describe(footprint));
      // On the wire a replica is a plain actor handle; the supervisor
      // casts it back to its typed interface.
      return {adopt_atom::value, id, std::string{}, caf::actor_cast<caf::actor>(r)};
    } catch (const std::exception& e) {
      return {adopt_atom::value, id, deploy_failure(name, e.what()), caf::actor{}};
    }
  };
  return {
    [=](deploy_atom, int64_t id, const std::string& spec_json,
        const std::string& state, const caf::node_id& supervisor_node) -> built {
      return build_replica(id, spec_json, state, supervisor_node);
    },
    [=](deploy_atom, int64_t id, const std::string& spec_json,
        const snapshot_parts& parts, const caf::node_id& supervisor_node) -> built {
      // One part is the state itself: built from the shared bytes, uncopied.
      if (parts.size() == 1)
        return build_replica(id, spec_json, *parts[0], supervisor_node);
      std::string state;
      try {
        state = snapshot_store::merge(parts);
      } catch (const std::exception& e) {
        return {adopt_atom::value, id,
                deploy_failure(name, std::string{"merging the snapshots to restore from: "}
                                       + e.what()),
                caf::actor{}};
      }
      return build_replica(id, spec_json, state, supervisor_node);
    },
    [=](serve_atom, int64_t id, const std::string& spec_json,
        const std::string& weights, const caf::node_id& server_node)
      -> caf::result<adopt_atom, int64_t, std::string, caf::actor> {
      try {
        auto spec = inference_spec_from_json(nlohmann::json::parse(spec_json));
        spec.memory_budget = memory_budget > 0 ? memory_budget : -1;
        spec.compute_device = compute_device;
        // Inference stages count against each other, not against a
        // training deployment's generation (a node serves one job anyway).
        int64_t others = 0;
        for (const auto& [addr, c] : *committed)
          if (c.generation == inference_generation)
            others += c.bytes;
        inference_footprint footprint;
        auto a = spawn_inference_stage(self->system(), spec, weights, dp, server_node,
                                       others, &footprint);
        committed->emplace(a.address(),
                           committed_bytes{inference_generation, footprint.total()});
        self->monitor(a);
        spdlog::info("{}: serving {} (layers [{}, {})), predicted {}", name, spec.label,
                     spec.first_layer, spec.end_layer,
                     planner::format_bytes(footprint.total()));
        return {adopt_atom::value, id, std::string{}, caf::actor_cast<caf::actor>(a)};
      } catch (const std::exception& e) {
        return {adopt_atom::value, id, deploy_failure(name, e.what()), caf::actor{}};
      }
    },
  };
}

device_actor::behavior_type
device_fun(device_self self, device_options opts, std::shared_ptr<data_plane> dp) {
  // What the process holds before any job: a replica's measured peak is
  // what its job added to it (job_peak_bytes).
  detail::restart_peak_measurement();
  self->state.opts = opts;
  self->state.hardware = kernels::describe_device(torch::Device(opts.compute_device));
  self->state.dp = dp;
  self->state.claim = detail::job_claim{self->system().node()};
  self->set_down_handler([=](caf::down_msg& dm) {
    // The claimant's process died or the job ended without a release: the
    // snapshots stay until the next job claims the node.
    if (self->state.claim.claimant_down(dm.source))
      free_node(self, "the job's supervisor went down");
  });
  // Linked: it goes when the device goes (user_shutdown, kill).
  self->state.uploads = state_uploads(
    static_cast<uint64_t>(opts.memory_bytes > 0 ? opts.memory_bytes : int64_t{2} << 30));
  self->state.builder = self->spawn<caf::detached + caf::linked>(
    replica_builder, caf::actor_cast<caf::actor>(self), dp, opts.name,
    self->state.halt_below, opts.memory_bytes, opts.compute_device);
  if (dp)
    // Snapshots from peers: one larger than the node's whole budget could
    // not be kept within it.
    dp->add_sink(caf::actor_cast<caf::actor>(self),
                 static_cast<uint64_t>(std::max<int64_t>(opts.memory_bytes, 0)));
  detail::drop_unexpected(self, "device " + opts.name);
  return {
    [=](caps_atom) -> std::string {
      const auto& o = self->state.opts;
      const auto& hw = self->state.hardware;
      return nlohmann::json{{"name", o.name},
                            {"compute_device", hw.device},
                            {"device_name", hw.name},
                            {"blas", kernels::cpu_blas_name()},
                            {"device_memory_bytes", hw.memory_bytes},
                            {"library_workspace_bytes", hw.library_workspace_bytes},
                            {"memory_bytes", o.memory_bytes},
                            {"threads", o.threads},
                            {"slowdown", o.slowdown},
                            {"slowdown_emulated", o.slowdown != 1.0},
                            {"endpoint", o.endpoint},
                            {"link_interface", o.link_interface},
                            {"pid", static_cast<int64_t>(::getpid())},
                            {"data_port", self->state.dp ? self->state.dp->port() : 0},
                            {"replicas", self->state.replicas.size()}}
        .dump();
    },
    [=](caf::ping_atom) { return caf::pong_atom::value; },
    [=](heartbeat_atom, int64_t seq) -> caf::result<heartbeat_atom, int64_t> {
      return {heartbeat_atom::value, seq};
    },
    [=](tensor_atom, serialization::tensor_message& m) {
      auto why = self->state.claim.admits(m);
      if (!why.empty()) {
        spdlog::warn("{}: dropped {}", self->state.opts.name, why);
        return;
      }
      if (m.kind == serialization::tensor_kind::echo) {
        // A link probe's CAF channel; its data-plane echoes are answered
        // by the data plane itself. A stream's fillers want no reply.
        if (m.step == serialization::echo_without_reply)
          return;
        serialization::tensor_message reply;
        reply.kind = serialization::tensor_kind::echo_reply;
        reply.job = m.job;
        reply.generation = m.generation; // the prober's tag (ast_probe)
        reply.step = static_cast<int64_t>(m.payload.size());
        // Back over a CAF channel too, as every tensor goes (channel.hpp).
        if (auto prober = caf::actor_cast<caf::actor>(self->current_sender()))
          make_caf_channel(prober)->send(self, std::move(reply));
        return;
      }
      if (m.kind != serialization::tensor_kind::snapshot) {
        spdlog::error("{}: dropped a tensor of kind {} (a device keeps "
                      "snapshots only)",
                      self->state.opts.name, serialization::to_string(m.kind));
        return;
      }
      // A replica's snapshot from a deployment the job has replaced (one
      // on a node counted lost that still ran, or one sent before a halt
      // and delivered after it): kept, it would push out of the store a
      // version the supervisor took from the inventory to recover from, and
      // the deployment that restores it would find nothing. What the
      // supervisor sends or a node copies (sender -1) is current.
      const auto halted_below = self->state.halt_below->load();
      if (m.sender >= 0 && m.generation < halted_below) {
        spdlog::info("{}: dropped snapshot {} of version {} from generation {} (halted "
                     "below {})",
                     self->state.opts.name, m.key, m.step, m.generation, halted_below);
        return;
      }
      std::string err = self->state.store.put(m.key, m.step, std::move(m.payload));
      if (!err.empty())
        spdlog::error("{}: dropped snapshot: {}", self->state.opts.name, err);
    },
    [=](inventory_atom, int32_t tag)
      -> caf::result<inventory_atom, int32_t, std::string> {
      auto why = refusal(self, "an inventory");
      if (!why.empty())
        return caf::make_error(caf::sec::runtime_error, why);
      return {inventory_atom::value, tag, self->state.store.inventory().dump()};
    },
    [=](claim_atom, int64_t job, int64_t last_step, int64_t path_window_ms)
      -> std::tuple<std::string, int64_t> {
      auto& st = self->state;
      const auto& name = st.opts.name;
      const auto before = st.claim.claimant();
      auto err = st.claim.take(job, last_step, self->current_sender());
      if (!err.empty()) {
        spdlog::warn("{}: refused job {}: {}", name, job, err);
        return {name + " refused job " + std::to_string(job) + ": " + err,
                int64_t{0}};
      }
      if (st.claim.claimant() != before) {
        self->monitor(self->current_sender());
        if (st.dp) {
          st.dp->serve_job(job, std::chrono::milliseconds(
                                  std::clamp<int64_t>(path_window_ms, 0, longest_wait_ms)));
          tell_claimant_of_unreachable_peers(self);
        }
        detail::restart_peak_measurement();
        kernels::reset_device_memory_peak(torch::Device(st.opts.compute_device));
        spdlog::info("{}: serving job {}", name, job);
      }
      int64_t dropped = 0;
      if (st.store_job != job) {
        // Left in the store, an earlier job's snapshots (newer versions
        // than this job has reached) would be restored by this one.
        dropped = static_cast<int64_t>(st.store.bytes());
        st.store.clear();
        st.reading = {};
        st.uploads.clear();
        st.store_job = job;
      }
      return {std::string{}, dropped};
    },
    [=](release_atom, int64_t job) {
      auto& st = self->state;
      if (!refusal(self, "a release").empty())
        return;
      if (!st.claim.release(job)) {
        spdlog::warn("{}: ignored a release of job {} ({} holds the node)",
                     st.opts.name, job, st.claim.describe());
        return;
      }
      if (st.store_job == job) {
        st.store.clear();
        st.store_job = 0;
      }
      free_node(self, "job " + std::to_string(job) + " released it");
    },
    [=](fetch_atom, const std::string& key, int64_t version)
      -> caf::typed_response_promise<std::string, std::string> {
      auto why = refusal(self, "a snapshot read"); // before the promise takes the sender
      auto rp = self->make_response_promise<std::string, std::string>();
      if (!why.empty()) {
        rp.deliver(why, std::string{});
        return rp;
      }
      auto parts = held_parts(self, key, version);
      if (parts.empty()) {
        rp.deliver(no_snapshot(self, key, version), std::string{});
        return rp;
      }
      auto node = self->state.opts.name;
      off_device(
        self, [=] { return materialize(parts, node, key); },
        [=](std::string& err, std::string& bytes) mutable {
          rp.deliver(std::move(err), std::move(bytes));
        });
      return rp;
    },
    [=](fetch_atom, const std::string& key, int64_t version, int64_t offset)
      -> caf::typed_response_promise<std::string, std::string, int64_t> {
      auto why = refusal(self, "a snapshot read"); // before the promise takes the sender
      auto rp = self->make_response_promise<std::string, std::string, int64_t>();
      if (!why.empty()) {
        rp.deliver(why, std::string{}, int64_t{0});
        return rp;
      }
      // The piece at `offset` of the snapshot being read, whose bytes are
      // kept for the pieces to come until the last is read.
      auto answer = [self, key, version, offset](
                      caf::typed_response_promise<std::string, std::string, int64_t>& rp,
                      snapshot_bytes bytes) {
        auto [piece, last] = piece_at(*bytes, offset);
        auto& r = self->state.reading;
        if (last && r.key == key && r.version == version && r.bytes == bytes)
          r = {}; // read to the end (or past it): the bytes are not kept
        rp.deliver(std::string{}, std::move(piece), static_cast<int64_t>(bytes->size()));
      };
      auto& r = self->state.reading;
      if (offset != 0 && r.key == key && r.version == version && r.bytes) {
        answer(rp, r.bytes);
        return rp;
      }
      r = {};
      auto parts = held_parts(self, key, version);
      if (parts.empty()) {
        rp.deliver(no_snapshot(self, key, version), std::string{}, int64_t{0});
        return rp;
      }
      if (parts.size() == 1) {
        r = {key, version, parts[0]};
        answer(rp, r.bytes);
        return rp;
      }
      auto node = self->state.opts.name;
      const auto job = self->state.store_job;
      off_device(
        self, [=] { return materialize(parts, node, key); },
        [=](std::string& err, std::string& bytes) mutable {
          if (!err.empty()) {
            rp.deliver(std::move(err), std::string{}, int64_t{0});
            return;
          }
          auto merged = std::make_shared<const std::string>(std::move(bytes));
          // Kept for the next pieces unless the node went on to another job
          // (whose reads must never see this one's states) meanwhile.
          if (self->state.store_job == job)
            self->state.reading = {key, version, merged};
          answer(rp, merged);
        });
      return rp;
    },
    [=](copy_atom, const std::string& key, int64_t version, const std::string& endpoint,
        uint64_t destination) -> caf::typed_response_promise<std::string> {
      auto why = refusal(self, "a snapshot copy"); // before the promise takes the sender
      auto rp = self->make_response_promise<std::string>();
      if (!why.empty()) {
        rp.deliver(why);
        return rp;
      }
      auto& st = self->state;
      if (!st.dp) {
        rp.deliver(st.opts.name + " has no data plane to copy a snapshot over");
        return rp;
      }
      auto parts = held_parts(self, key, version);
      if (parts.empty()) {
        rp.deliver(no_snapshot(self, key, version));
        return rp;
      }
      channel_ptr to;
      try {
        to = make_tcp_channel(st.dp, endpoint, destination);
      } catch (const std::invalid_argument& e) {
        rp.deliver(st.opts.name + " could not copy snapshot " + key + ": " + e.what());
        return rp;
      }
      auto node = st.opts.name;
      const auto job = st.claim.job();
      // The worker also hands the frame to the data plane, which waits
      // while the link's queue is full.
      off_device(
        self,
        [=]() -> work_outcome {
          auto [err, bytes] = materialize(parts, node, key);
          if (!err.empty())
            return {err, std::string{}};
          serialization::tensor_message m;
          m.kind = serialization::tensor_kind::snapshot;
          m.job = job;
          m.step = version;
          m.key = key;
          m.payload = std::move(bytes);
          err = to->send(nullptr, std::move(m));
          if (!err.empty())
            err = node + " could not copy snapshot " + key + " to " + endpoint + ": " + err;
          return {err, std::string{}};
        },
        [=](std::string& err, std::string&) mutable {
          if (err.empty())
            spdlog::info("{}: copying snapshot {} of version {} to {}", node, key, version,
                         endpoint);
          rp.deliver(std::move(err));
        });
      return rp;
    },
    [=](upload_atom, int64_t upload, int64_t total, int64_t offset, std::string& piece)
      -> std::string {
      auto why = refusal(self, "a state upload");
      if (!why.empty())
        return why;
      auto sender = self->current_sender();
      auto err = self->state.uploads.append({sender ? sender->id() : 0, upload}, total,
                                            offset, std::move(piece));
      if (!err.empty()) {
        err = self->state.opts.name + " refused " + err;
        spdlog::warn("{}", err);
      }
      return err;
    },
    [=](profile_atom, const std::string& request)
      -> caf::typed_response_promise<std::string, std::string> {
      // Profiling takes seconds: a worker thread does it, so this device
      // keeps answering heartbeats.
      auto why = refusal(self, "a profile request"); // before the promise takes the sender
      auto rp = self->make_response_promise<std::string, std::string>();
      if (!why.empty()) {
        rp.deliver(why, std::string{});
        return rp;
      }
      auto opts = self->state.opts;
      self->system().spawn<caf::detached>(
        [rp, opts, request](caf::event_based_actor*) mutable {
          try {
            auto j = nlohmann::json::parse(request);
            training::profiler_options po;
            j.at("batch_sizes").get_to(po.batch_sizes);
            j.at("warmup").get_to(po.warmup);
            j.at("repeats").get_to(po.repeats);
            po.optimizer = training::parse_optimizer(j.at("optimizer").get<std::string>());
            // Absent from an older peer's request: a training profile.
            po.forward_only = j.value("forward_only", false);
            po.slowdown = opts.slowdown;
            po.device = opts.name;
            po.compute_device = torch::Device(opts.compute_device);
            auto name = j.at("model").get<std::string>();
            auto model = training::build_model(name, j.at("model_options"));
            auto profile = training::profile_model(model, name, po);
            rp.deliver(std::string{}, nlohmann::json(profile).dump());
          } catch (const std::exception& e) {
            rp.deliver(opts.name + ": " + e.what(), std::string{});
          }
        });
      return rp;
    },
    [=](probe_atom, const std::string& endpoint, int64_t bytes,
        int32_t repeats, int32_t path, int32_t stream)
      -> caf::typed_response_promise<std::string, int64_t, int64_t> {
      auto why = refusal(self, "a link probe"); // before the promise takes the sender
      auto rp = self->make_response_promise<std::string, int64_t, int64_t>();
      if (!why.empty()) {
        rp.deliver(why, int64_t{0}, int64_t{0});
        return rp;
      }
      auto name = self->state.opts.name;
      auto dp = self->state.dp;
      // The peer's node serves the same job (or, between jobs, none).
      const auto job = self->state.claim.job();
      self->system().spawn(
        [rp, name, endpoint, bytes, repeats, path, stream, dp,
         job](caf::blocking_actor* w) mutable {
          auto fail = [&](const std::string& why) {
            rp.deliver(name + " -> " + endpoint + ": " + why, int64_t{0},
                       int64_t{0});
          };
          if (bytes < 1 || bytes > (int64_t{1} << 30) || repeats < 1
              || repeats > 100)
            return fail("probe size or repeat count out of range");
          if (stream < 0 || stream > 1024 || stream * bytes > (int64_t{1} << 30))
            return fail("probe stream of " + std::to_string(stream)
                        + " payloads out of range (0 to 1024, 1 GiB in all)");
          if (path != probe_caf && path != probe_data_plane && path != probe_auto)
            return fail("unknown probe path " + std::to_string(path));
          device_actor peer;
          try {
            auto [host, port] = parse_endpoint(endpoint);
            peer = connect_device(w->system(), host, port, std::chrono::seconds(5));
          } catch (const std::exception& e) {
            return fail(e.what());
          }
          std::string peer_dp;
          int64_t port = 0;
          if (path != probe_caf) {
            w->request(peer, std::chrono::seconds(5), caps_atom::value)
              .receive(
                [&](const std::string& text) {
                  auto j = nlohmann::json::parse(text, nullptr, false);
                  if (j.is_object())
                    port = j.value("data_port", int64_t{0});
                },
                [&](caf::error&) {});
            bool mine = dp != nullptr;
            bool theirs = !data_endpoint(endpoint, port).empty();
            if (path == probe_auto)
              path = mine && theirs ? probe_data_plane : probe_caf;
            else if (!mine)
              return fail("this node has no data plane");
            else if (!theirs)
              return fail("the peer has no data plane");
          }
          // The probe's channel (channel.hpp), the way tensors between
          // the two nodes would go: out through our data plane to the
          // peer's plane itself (destination 0), which answers on the same
          // connection to our plane's actor `step`; or a CAF message to the
          // peer's device actor, which answers the sender. Either way the
          // answer is an echo_reply tensor message.
          channel_ptr ch;
          if (path == probe_data_plane) {
            peer_dp = data_endpoint(endpoint, port);
            dp->add_sink(caf::actor_cast<caf::actor>(w), max_echo_reply);
            ch = make_tcp_channel(dp, peer_dp, 0);
          } else {
            ch = make_caf_channel(caf::actor_cast<caf::actor>(peer));
          }
          // Each echo that asks for an answer has a tag of its own
          // (answers_echo).
          int64_t tag = 0;
          // `answer` false: a stream's filler, which the peer takes in
          // without replying.
          auto send = [&](std::string payload, bool answer) {
            serialization::tensor_message m;
            m.kind = serialization::tensor_kind::echo;
            m.job = job;
            m.generation = answer ? ++tag : 0;
            m.step = answer ? static_cast<int64_t>(w->id())
                            : serialization::echo_without_reply;
            m.payload = std::move(payload);
            return ch->send(w, std::move(m)).empty();
          };
          auto await_echo = [&] {
            const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
            for (;;) {
              bool answered = false, timed_out = false;
              w->receive([&](tensor_atom, serialization::tensor_message& m) {
                           answered = answers_echo(m, tag);
                         },
                         caf::after(std::max(deadline - std::chrono::steady_clock::now(),
                                             std::chrono::steady_clock::duration::zero()))
                           >> [&] { timed_out = true; });
              if (answered || timed_out)
                return answered;
            }
          };
          auto echo = [&](std::string payload) {
            return send(std::move(payload), true) && await_echo();
          };
          if (stream > 0) {
            auto t = stream_seconds(bytes, stream, send, await_echo);
            auto tiny = fastest_round_trips(1, 1, echo).tiny_s;
            if (dp)
              dp->remove_sink(w->id());
            if (t <= 0 || tiny < 0)
              return fail("no echo within 30 s");
            rp.deliver(std::string{}, static_cast<int64_t>(tiny / 2 * 1e9),
                       static_cast<int64_t>(static_cast<double>(bytes) * stream
                                            / t));
            return;
          }
          // On a fast path (loopback through the data plane moves 1 MiB in
          // about 0.3 ms) the payload may add less than scheduling noise to
          // the round trip, and the noise would then decide the bandwidth.
          // The payload grows until it adds at least a quarter of the tiny
          // round trip; if it never does, that quarter bounds the transfer
          // time and the bandwidth is a lower bound.
          int64_t probe_bytes = bytes;
          round_trips rt;
          for (int growth = 0;; ++growth) {
            rt = fastest_round_trips(probe_bytes, repeats, echo);
            if (rt.tiny_s < 0 || rt.big_s < 0)
              break;
            if (rt.big_s - rt.tiny_s >= rt.tiny_s / 4
                || growth == max_probe_growths
                || probe_bytes > (int64_t{1} << 30) / 4)
              break;
            probe_bytes *= 4;
          }
          if (dp)
            dp->remove_sink(w->id());
          if (rt.tiny_s < 0 || rt.big_s < 0)
            return fail("no echo within 30 s");
          auto transfer = std::max(rt.big_s - rt.tiny_s, rt.tiny_s / 4);
          rp.deliver(std::string{}, static_cast<int64_t>(rt.tiny_s / 2 * 1e9),
                     static_cast<int64_t>(static_cast<double>(probe_bytes)
                                          / transfer));
        });
      return rp;
    },
    [=](slow_atom, int32_t permille) {
      if (!refusal(self, "a slowdown").empty())
        return;
      if (permille < 1000) {
        spdlog::error("{}: ignored slowdown {} permille (must be >= 1000)",
                      self->state.opts.name, permille);
        return;
      }
      self->state.opts.slowdown = permille / 1000.0;
      spdlog::info("{}: emulated slowdown now {:.2f}", self->state.opts.name,
                   self->state.opts.slowdown);
      for (auto& r : self->state.replicas)
        self->send(caf::actor_cast<replica_actor>(r), slow_atom::value, permille);
    },
    [=](hog_atom, int64_t bytes) -> caf::typed_response_promise<std::string> {
      auto why = refusal(self, "a memory hog"); // before the promise takes the sender
      auto rp = self->make_response_promise<std::string>();
      auto hog = self->state.hog;
      if (!why.empty() || bytes <= 0) {
        if (why.empty())
          hog->release();
        rp.deliver(why);
        return rp;
      }
      // Writing hundreds of MiB takes a while: not on this actor, which
      // answers the job's heartbeats.
      self->system().spawn<caf::detached>(
        [rp, hog, bytes, name = self->state.opts.name](caf::blocking_actor*) mutable {
          rp.deliver(hog->hold(bytes, name));
        });
      return rp;
    },
    [=](reset_atom) {
      if (!refusal(self, "a connection reset").empty() || !self->state.dp)
        return;
      spdlog::warn("{}: breaking every data-plane connection (injected fault)",
                   self->state.opts.name);
      self->state.dp->reset_connections();
    },
    [=](deploy_atom, const std::string& spec_json, std::string& state)
      -> caf::typed_response_promise<std::string, caf::actor> {
      // Now: queue_build's promise takes the sender from the message.
      const auto& sender = self->current_sender();
      const uint64_t from = sender ? sender->id() : 0;
      return queue_build(self, "a deployment", deploy_atom::value, [&] {
        auto j = nlohmann::json::parse(spec_json);
        auto spec = replica_spec_from_json(j);
        require_claim(self, spec.job);
        spec.slowdown = std::max(spec.slowdown, self->state.opts.slowdown);
        // An empty state with "restore_version" means: rebuild from the
        // snapshots this node already holds (no transfer).
        auto version = j.value("restore_version", int64_t{-1});
        snapshot_parts parts;
        if (state.empty() && version >= 0) {
          // The parts, not their merge: the builder merges them (protocol.hpp).
          parts = self->state.store.parts(spec.first_layer, spec.end_layer, version);
          // Said here: an empty state would otherwise be taken for an
          // upload, and fail to decode with no word of the version.
          if (parts.empty())
            throw std::runtime_error(
              no_snapshot(self, range_key(spec.first_layer, spec.end_layer), version)
              + " to restore from");
          // A job without snapshots keeps none: what is here was sent for
          // this build (the supervisor's send_states), and the replica
          // holds it from now on (the parts keep the bytes alive).
          if (spec.snapshot_every == 0)
            self->state.store.erase(range_key(spec.first_layer, spec.end_layer), version);
        }
        if (state.empty() && parts.empty())
          take_upload(self, from, j, spec.label, state);
        return build_input{to_json(spec).dump(), std::move(state), std::move(parts)};
      });
    },
    [=](serve_atom, const std::string& spec_json, std::string& weights)
      -> caf::typed_response_promise<std::string, caf::actor> {
      const auto& sender = self->current_sender(); // before queue_build's promise
      const uint64_t from = sender ? sender->id() : 0;
      return queue_build(self, "an inference deployment", serve_atom::value, [&] {
        auto j = nlohmann::json::parse(spec_json);
        auto spec = inference_spec_from_json(j);
        require_claim(self, spec.job);
        if (weights.empty())
          take_upload(self, from, j, spec.label, weights);
        spec.slowdown = std::max(spec.slowdown, self->state.opts.slowdown);
        return build_input{to_json(spec).dump(), std::move(weights), {}};
      });
    },
    [=](adopt_atom, int64_t id, std::string& err, caf::actor& replica) {
      auto it = self->state.deploying.find(id);
      if (self->current_sender() != caf::actor_cast<caf::strong_actor_ptr>(self->state.builder)
          || it == self->state.deploying.end()) {
        spdlog::error("{}: ignored a replica handed over by a stranger",
                      self->state.opts.name);
        return;
      }
      if (replica)
        self->state.replicas.push_back(replica);
      it->second.deliver(std::move(err), std::move(replica));
      self->state.deploying.erase(it);
    },
    [=](link_atom, const std::string& host, uint16_t port)
      -> caf::typed_response_promise<std::string> {
      auto why = refusal(self, "a link request"); // before the promise takes the sender
      auto rp = self->make_response_promise<std::string>();
      if (!why.empty()) {
        rp.deliver(why);
        return rp;
      }
      // Connecting waits for the peer's handshake, up to 5 s for a peer that
      // takes the connection and says nothing: not on this actor, which
      // answers the job's heartbeats (1 s of silence counts the node lost
      // by default; a job links a node it adds to the live ones mid-run).
      self->system().spawn<caf::detached>(
        [rp, host, port, name = self->state.opts.name](caf::blocking_actor* worker) mutable {
          try {
            connect(worker->system(), host, port, std::chrono::seconds(5));
            rp.deliver(std::string{});
          } catch (const std::exception& e) {
            spdlog::error("{}: {}", name, e.what());
            rp.deliver(std::string{e.what()});
          }
        });
      return rp;
    },
    [=](stop_atom) {
      if (!refusal(self, "a stop").empty())
        return;
      for (auto& r : self->state.replicas)
        self->send(caf::actor_cast<replica_actor>(r), stop_atom::value);
      self->state.replicas.clear();
    },
    [=](halt_atom, int64_t generation) {
      if (!refusal(self, "a halt").empty())
        return;
      auto& h = *self->state.halt_below;
      if (generation > h.load())
        h.store(generation);
    },
  };
}

} // namespace

device_actor spawn_device(caf::actor_system& sys, const device_options& opts,
                          std::shared_ptr<data_plane> dp) {
  auto resolved = opts;
  resolved.compute_device = kernels::resolve_compute_device(opts.compute_device).str();
  return sys.spawn<caf::detached>(device_fun, resolved, std::move(dp));
}

} // namespace asteroid::actors
