#pragma once
/// \file
/// The step driver of a job's supervisor actor (internal to the actors
/// component; the program-facing actor is supervisor_actor.hpp): plans,
/// deploys, drives the steps, detects losses and recovers from them, on the
/// fiber of the event-based actor supervisor_engine.cpp spawns: where it
/// waits, it waits in that actor's inbox (fiber_inbox.hpp), never in a
/// blocking receive. Its members are defined by concern
/// in supervisor_*.cpp; docs/runtime.md and docs/fault_tolerance.md describe
/// the behaviour.
#include "cut_paths.hpp"
#include "fiber_inbox.hpp"
#include "job_claim.hpp"
#include "job_control.hpp"
#include "unreachable_reports.hpp"

#include "asteroid/actors/channel.hpp"
#include "asteroid/actors/data_plane.hpp"
#include "asteroid/actors/heartbeat_monitor.hpp"
#include "asteroid/actors/job.hpp"
#include "asteroid/actors/snapshot_store.hpp"
#include "asteroid/actors/stage.hpp"
#include "asteroid/planner/cluster.hpp"
#include "asteroid/planner/model_profile.hpp"
#include "asteroid/planner/chrome_trace.hpp"
#include "asteroid/serialization/tensor_wire.hpp"
#include "asteroid/training/metrics_sink.hpp"
#include "asteroid/training/progress_line.hpp"

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace asteroid::actors::detail {

using nlohmann::json;
using clock = std::chrono::steady_clock;
using std::chrono::milliseconds;



inline double wall_us() {
  return std::chrono::duration<double, std::micro>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

inline double seconds_between(clock::time_point a, clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

struct replica_ref {
  int stage;
  int replica;
  int device;
  replica_actor handle;
  /// Where the step driver's inputs (stage 0) or labels (last stage) for
  /// this replica go, chosen when it is deployed: this process's data plane
  /// where the replica's node has one, else CAF. Null for the stages between.
  channel_ptr feed;
};

/// True when the ranges of `inventory` ({"L0-3": [4, 5], ...}) held at
/// `version` tile [first, end) exactly.
inline bool tiles(const json& inventory, int first, int end, int64_t version) {
  int at = first;
  while (at < end) {
    int best = at;
    for (auto& [key, versions] : inventory.items()) {
      int a = 0, b = 0;
      if (!snapshot_store::parse_key(key, a, b) || a != at || b > end
          || b <= best)
        continue;
      for (auto& v : versions)
        if (v.is_number_integer() && v.get<int64_t>() == version)
          best = b;
    }
    if (best == at)
      return false;
    at = best;
  }
  return true;
}

/// A device went away (its connection closed, or a replica on it went down)
/// while the supervisor waited on it outside a step. Thrown by deploy() and
/// fetch_full_state(); deploy_surviving() plans again without the device.
struct device_lost : std::runtime_error {
  device_lost(int d, const std::string& why) : std::runtime_error(why), device(d) {}
  int device;
};

/// Where a deployment takes each stage's state from.
struct state_source {
  /// -1: the supervisor's model (first deployment, weights only).
  int64_t version = -1;
  /// Live devices' snapshot inventories: a device that holds its range at
  /// `version` restores locally (nothing is transferred).
  std::map<int, json> inventories;
  /// The whole model's state at `version`, for every other replica.
  serialization::named_tensors full;
};

/// The supervisor: plans, deploys, drives the steps, detects losses and
/// recovers from them (docs/runtime.md, docs/fault_tolerance.md).
class supervisor {
public:
  /// `self` is the actor whose fiber runs the supervisor, `inbox` its
  /// inbox: every wait of the supervisor goes through it.
  supervisor(caf::event_based_actor* self, fiber_inbox& inbox, const job_spec& job,
             const std::vector<device_actor>& devices,
             models::sequential_model model,
             std::shared_ptr<data::dataset> train,
             std::shared_ptr<data::dataset> test,
             std::shared_ptr<job_control> control)
    : sys_(self->system()), self_(self), inbox_(inbox), job_(job), nodes_(job.nodes),
      devices_(devices), model_(std::move(model)), train_(std::move(train)),
      test_(std::move(test)), control_(std::move(control)),
      metrics_(job.metrics_path), progress_(job.progress),
      heartbeats_(static_cast<int>(devices.size()),
                  milliseconds(job.fault_tolerance.heartbeat_ms),
                  job.fault_tolerance.heartbeat_misses) {
    if (control_ && control_->on_record)
      metrics_.set_observer(control_->on_record);
  }

  ~supervisor() {
    // Whatever ended the job (a failed first deployment included), no
    // replica it deployed outlives it on a node.
    stop_replicas();
    release_nodes();
    if (micro_batch_relay_)
      self_->send(micro_batch_relay_, stop_atom::value);
  }

  job_result run();

private:
  /// Whether the program asked the job to end (checked between steps).
  bool stop_requested() const {
    return control_ && control_->stop_requested.load();
  }
  void enter(job_state s) const {
    if (control_)
      control_->enter(s);
  }
  const fault_tolerance_options& ft() const { return job_.fault_tolerance; }
  std::string who(int d) const {
    return d < static_cast<int>(nodes_.size()) ? nodes_[d]
                                               : "device " + std::to_string(d);
  }
  std::string name_of(int d) const { return caps_[d].value("name", who(d)); }
  /// "host:port" of device `d`'s data plane; empty where it has none (an
  /// in-process device, `--no-data-plane`) or the job turned it off.
  std::string data_endpoint(int d) const;
  bool snapshots_on() const {
    // Every recovery but the checkpoint baseline restores from snapshots.
    return ft().snapshot_every > 0 && ft().recovery != "restart"
           && ft().recovery != "none";
  }
  void fault_event(const std::string& event, json rec, int device = -1);
  /// Device `d` went away outside a step: dead from now on, reported as
  /// `event` with `rec` (the node's name is added).
  void mark_lost(int d, const std::string& event, json rec);

  // -- planning --
  void read_capabilities();
  /// Throws, naming the fault and node, when a scripted fault cannot be
  /// injected into the nodes as they reported themselves (before any work).
  void check_faults() const;
  /// Every device serves this job (`ast_claim`) and drops the snapshots of
  /// an earlier one; throws naming a node that serves another job.
  void claim_nodes();
  /// Asks `handle` (node `who`) to serve this job: "" or why it refused.
  std::string claim(const device_actor& handle, const std::string& who);
  /// Every live device is done with this job (`ast_free`).
  void release_nodes();
  std::optional<planner::model_profile> known_profile();
  /// Whether the job can profile and plan (a profile, a profile file or a
  /// planner): what known_profile() returns something for, without the copy.
  bool can_plan() const {
    return profile_ || !job_.profile_path.empty() || !job_.planner.empty();
  }
  /// Whether track_speed watches for drift.
  bool drift_tracking_on() const {
    return ft().drift_factor > 1.0 && snapshots_on() && can_plan();
  }
  /// Whether track_memory re-plans for nodes over their budgets.
  bool memory_tracking_on() const {
    return ft().memory_replan && snapshots_on() && can_plan();
  }
  const planner::model_profile& profile();
  /// With job_spec::speeds "measured" (or "auto" and nodes that name
  /// different compute devices): times the model on every node and keeps
  /// each node's speed relative to the profile in measured_speed_.
  void measure_speeds();
  /// The cluster the planner sees: measured links or the reports, with
  /// drift corrections.
  planner::cluster full_cluster() const;
  planner::cluster reported_cluster() const;
  /// The slowdown of the device the profile's times are of: the profiling
  /// node's (job_spec::profile_node), 1 when profiled in this process.
  double reference_slowdown() const;
  planner::plan fresh_plan_on_survivors();
  planner::plan initial_plan();

  // -- deployment --
  void link_nodes();
  /// Throws device_lost as soon as a device in use goes away.
  void deploy(const planner::plan& p, const state_source& src);
  /// Deploys the plan and state `make()` returns and makes it the current
  /// plan. A device lost during the deployment is marked dead and `make` is
  /// called again, so it must plan on the survivors (dead_); it throws when
  /// nothing can be planned. Returns the state source deployed.
  state_source deploy_surviving(
    const std::function<std::pair<planner::plan, state_source>()>& make,
    int64_t step);
  /// The device whose connection or replica `dm` reports gone, with why
  /// (-1: neither); a closed connection also goes to closed_.
  std::pair<int, std::string> device_down(const caf::down_msg& dm);
  /// Keeps a report that a node's data plane gave up on `endpoint`
  /// (`ast_unrch`) for judge_unreachable (unreachable_reports.hpp).
  void hold_unreachable(const caf::strong_actor_ptr& reporter, const std::string& endpoint,
                        const std::string& why);
  /// The device the reports held lose now, with why, if any: a peer
  /// counts as answering heartbeats when it did within two intervals.
  std::optional<unreachable_reports::loss> judge_unreachable(clock::time_point now);
  /// At a step boundary: takes the outcomes of the probes of failed paths
  /// (a device whose path answered is returned_, for rejoin) and starts the
  /// probes that are due, each on a helper actor of its own so that the
  /// steps go on meanwhile (cut_paths.hpp).
  void probe_cut_paths();
  /// Sends `xs` to `to` (device `d`'s actor or a replica on it) and returns
  /// its reply (the first message from `to` made of `Reply` types). Throws
  /// device_lost at once when a device goes away meanwhile (CAF 0.17 never
  /// fails a request to a dead peer), std::runtime_error naming `what`
  /// after `timeout`.
  template <class... Reply, class Handle, class... Ts>
  caf::message ask(int d, const Handle& to, milliseconds timeout,
                   const std::string& what, const Ts&... xs);
  /// ask() without the send: waits for `to`'s answer to a message already
  /// sent. `d` is the device `to` belongs to, -1 for a stage actor.
  template <class... Reply, class Handle>
  caf::message await_reply(int d, const Handle& to, milliseconds timeout,
                           const std::string& what);
  /// Sends `xs` to `to` and returns its answer (the first message from `to`
  /// made of `Reply` types); throws std::runtime_error naming `what` after
  /// `timeout`, or when `to` answers with an error. Unlike ask(), nothing
  /// else is watched meanwhile (heartbeats, losses): for the questions
  /// asked before a job's nodes are claimed and between steps. Unlike a
  /// timed request, it leaves nothing behind: CAF 0.17 still delivers a
  /// request's `request_timeout` after its answer came, and a blocking
  /// actor skips that message at every receive from then on (the step
  /// driver's mailbox held ~900 of them after the README's 937-step job).
  template <class... Reply, class Handle, class... Ts>
  caf::message exchange(const Handle& to, milliseconds timeout,
                        const std::string& what, const Ts&... xs);
  /// The running replica that can serve stage `st` on device `d` in the
  /// next deployment: one of the same layers on that device, whose node
  /// holds the snapshot it would roll back to.
  std::optional<replica_ref> keepable(const planner::stage_plan& st, int d,
                                      const state_source& src) const;
  /// Waits (bounded) for the replies to fetches that a loss interrupted, so
  /// that no later ask takes one for its own.
  void settle_abandoned(int64_t step);
  /// Stops every stage actor, and with them their replicas.
  void stop_replicas();
  std::map<int, json> inventories();
  /// Snapshot `key` at `version` from node `holder`, read in pieces
  /// (state_uploads.hpp says why); throws naming `what`.
  std::string read_snapshot(int holder, const std::string& key, int64_t version,
                            const std::string& what);
  serialization::named_tensors fetch_full_state(
    const std::map<int, json>& inv, int64_t version);
  /// Copies, node to node over the data plane, the snapshots with which the
  /// devices of `next` can rebuild their stages at `src.version` from their
  /// own nodes' snapshots (snapshot_copies.hpp), and updates
  /// `src.inventories` for the devices that then can. Returns how many
  /// copies arrived. A copy refused or not arrived in time is logged and
  /// left to fetch_full_state.
  int copy_snapshots(const planner::plan& next, state_source& src);
  /// Asks each device of `wanted` (device -> layer range) for its snapshot
  /// inventory until it holds that range at `version` (snapshots sent to it
  /// travel on the data plane, the question whether they arrived on CAF),
  /// until `deadline`. Returns the inventories of those that do; throws
  /// device_lost.
  std::map<int, json> await_snapshots(const std::map<int, std::pair<int, int>>& wanted,
                                      int64_t version, clock::time_point deadline);
  /// Where each member of `next` takes its state at `src.version` from
  /// the nodes' snapshots (`src.inventories`): its own node's, copied there
  /// (copy_snapshots), or, for any member still without, `src.full`
  /// fetched from them (fetch_full_state). Returns the copies that arrived.
  int state_from_snapshots(const planner::plan& next, state_source& src);
  /// Members of `p` not kept running (`keep`, by stage and member) whose
  /// nodes do not hold their range at `src.version` (every member, at a
  /// first deployment) get their stage's state from this
  /// process as one data-plane frame (`state_of(s)`: stage s's, encoded),
  /// which their node keeps as a snapshot of `version`; waited for up to
  /// `timeout`. Returns the inventories of the members whose nodes hold
  /// their range at `version` now: they rebuild from there. The others (no
  /// data plane on either end, not arrived in time) are shipped it by their
  /// stage actor, over CAF in pieces. Throws device_lost.
  std::map<int, json> send_states(const planner::plan& p, const state_source& src,
                                  int64_t version,
                                  const std::vector<std::vector<bool>>& keep,
                                  const std::function<const std::string&(int)>& state_of,
                                  milliseconds timeout);
  /// This process's data plane (stage states, inputs and labels to nodes;
  /// it listens on loopback and turns every connection away, so it takes no
  /// frames), started at first use with the actor system's credentials;
  /// null when it cannot start.
  std::shared_ptr<data_plane> plane();
  /// Fills `src.inventories` with the live nodes' snapshot inventories once
  /// they hold every layer at `step` (waiting up to the step timeout for
  /// snapshots under way). False, and nothing filled, when snapshots are
  /// off, not taken at `step`, or the job has no data plane to copy them
  /// over; a re-plan then gathers the state from the replicas.
  bool snapshots_at(int64_t step, state_source& src);
  /// The state a boundary re-plan deploys `next` with: `src` as it is when
  /// it was gathered from the replicas; when it came from the snapshots
  /// (`from_snapshots`), the live nodes' inventories, with the copies
  /// `next` needs made (state_from_snapshots, which `copied` counts).
  state_source boundary_state(const planner::plan& next, const state_source& src,
                              bool from_snapshots, int& copied);
  serialization::named_tensors gather_full_state();
  /// The state replica `r` holds now (its stage's tensors); throws naming
  /// the stage and node when it does not answer.
  serialization::named_tensors state_of(const replica_ref& r);
  /// The largest absolute difference between any replica's state and
  /// replica 0's of its stage, as `full` (gather_full_state) holds it
  /// (job_spec::check_replicas).
  double replica_divergence(const serialization::named_tensors& full);

  // -- steps --
  /// Runs one step. `next` is asked for the next step's batch (nullptr:
  /// none) only once this step has started, and its loads go out at once:
  /// reading and feeding it overlap this step's compute instead of keeping
  /// the replicas waiting for their start.
  std::set<int> run_step(int64_t step, const data::batch& batch,
                         const std::function<const data::batch*()>& next,
                         std::vector<json>& reports);
  void feed(int64_t step, const data::batch& batch);

  // -- micro-batch actors (supervisor_micro_batches.cpp) --
  /// Spawns step `step`'s micro-batch actors (stopping any it had), each with
  /// its route through the current plan; none when the job turned them off.
  void spawn_micro_batches(int64_t step);
  /// Where step `step`'s replicas report their passes, for its start
  /// message: the relay, or an invalid handle when the step has no
  /// micro-batch actors.
  caf::actor micro_batch_reports_to(int64_t step) const;
  /// Where every micro-batch still in the pipeline is, asked of its actor
  /// (micro_batch_progress::where); those that finished are not listed.
  json micro_batches_in_flight();
  /// Step `step` is done: every pass of it has been reported, so its
  /// micro-batch actors have quit or are about to; they are stopped anyway,
  /// so that one a report never reached does not outlive its step. Returns
  /// the passes the relay took to them (-1: it did not answer).
  int64_t forget_micro_batches(int64_t step);
  void stop_micro_batches();
  void ping_all(clock::time_point now);
  /// A device answered heartbeat `seq` (round * 4096 + device).
  void heartbeat_answered(int64_t seq);
  /// Why a device the heartbeat monitor gave up on is lost.
  std::string silence_reason() const {
    return "no heartbeat for " + std::to_string(heartbeats_.tolerance().count()) + " ms";
  }
  void inject(const fault_spec& f);
  /// Injects the faults scripted for `when` ("recovery", "start") whose
  /// step is at most `step`, once each.
  void inject_faults_when(const std::string& when, int64_t step);
  void record_iteration(int64_t step, int64_t epoch, double wall,
                        double t_start, std::vector<json>& reports,
                        bool started_ahead);

  // -- run-ahead --
  /// Whether the current generation's replicas got `step`'s start while the
  /// step before ran.
  bool started_ahead(int64_t step) const {
    return started_ahead_ && started_ahead_->first == generation_
           && started_ahead_->second == step;
  }
  /// Whether step `next` may start before the supervisor has seen the
  /// reports of the step before: nothing is due at that boundary.
  bool may_run_ahead(int64_t next);
  /// Whether the reports of the running step could trigger a drift re-plan.
  bool drift_may_replan_next() const;

  // -- recovery --
  void drain_losses(int64_t step);
  int64_t recover(const std::set<int>& lost, int64_t failed_step);
  /// Writes the job file's checkpoint: `state` (weights and optimizer
  /// state, as gather_full_state returns it) before step `step`.
  void save_checkpoint(int64_t step, serialization::named_tensors state);
  /// The state `job_.resume_from` holds, checked against this job (model,
  /// model options, a step within `total_steps`, every layer's entries),
  /// and loaded into the supervisor's model. Throws std::invalid_argument
  /// naming the file and what does not match.
  state_source resume_state(int64_t total_steps);
  /// Whether the job file names a checkpoint: it is written every
  /// checkpoint_every steps whatever the recovery mode, and at the end.
  bool checkpoints_on() const { return !ft().checkpoint_path.empty(); }
  /// Admits devices that answer again at this boundary; with `admit` false
  /// (a step already runs ahead) it only looks for them.
  bool rejoin(int64_t step, bool admit);
  void reconnect_closed();
  bool track_speed(int64_t step, const std::vector<json>& reports);
  /// Re-plans when a node's measured peak (above its process's baseline)
  /// exceeds its memory budget, the planner seeing that budget shrunk by
  /// the overshoot; at a boundary no step runs ahead across (else it holds
  /// run-ahead back and decides at the next one).
  bool track_memory(int64_t step, const std::vector<json>& reports);
  void replan_at_boundary(int64_t step, const std::string& event, json rec);
  /// The current plan without the dead devices: patched (only their work
  /// moves; `rebalance` re-schedules it over their groups), or, with a
  /// profile, a fresh plan when the patch is predicted replan_threshold
  /// times slower or does not fit (then returns true). `changes` says what
  /// moved.
  bool plan_around_dead(bool rebalance, planner::plan& next,
                        std::vector<std::string>& changes);
  /// Takes the devices the program asked to remove out of the job at this
  /// boundary (no step running): their state is gathered from the running
  /// replicas, the plan is patched around them and deployed, they forget
  /// this job's snapshots and are never admitted again. False when nobody
  /// left.
  bool remove_requested(int64_t step);
  /// Adds the nodes the program asked to add at this boundary (no step
  /// running): each is connected, linked with the live nodes (its links
  /// measured when the job's were) and watched; then the state after the
  /// last step is gathered and a fresh plan on the live devices deployed.
  /// A node that cannot be added is reported ("add_refused"). False when
  /// none was added.
  bool add_requested(int64_t step);
  /// Asks node `from` to open its connection to the node at `to`: error
  /// text, empty on success.
  std::string link(const device_actor& from, const std::string& to);

  caf::actor_system& sys_;
  caf::event_based_actor* self_;
  fiber_inbox& inbox_;
  const job_spec& job_;
  /// "host:port" of each device: the job's nodes, then those added.
  std::vector<std::string> nodes_;
  std::vector<device_actor> devices_;
  models::sequential_model model_;
  std::shared_ptr<data::dataset> train_;
  std::shared_ptr<data::dataset> test_;
  std::shared_ptr<job_control> control_;
  training::metrics_sink metrics_;
  training::progress_line progress_;
  planner::chrome_trace trace_;
  heartbeat_monitor heartbeats_;
  std::vector<json> caps_;
  std::set<int> dead_;
  /// Reports of unreachable peers and who they lose.
  unreachable_reports unreachable_;
  std::set<int> returned_; ///< dead devices that answer heartbeats again
  /// Devices lost for a failed path, probed again from its other end now
  /// and then (probe_cut_paths), and the probes' outcomes.
  cut_paths cut_paths_;
  std::shared_ptr<probe_outcomes> probe_outcomes_ = std::make_shared<probe_outcomes>();
  /// Devices out: removed by the program (remove_requested), for good; or
  /// lost because a peer could not reach them (judge_unreachable): those
  /// still answer heartbeats, and admitted again on that alone they would
  /// stall the job on the same path until lost again, so they are back
  /// only once a probe over that path answers (cut_paths_). Not pinged.
  std::set<int> removed_;
  /// Dead devices whose connection closed (the process went away): a new
  /// process may come back at the same endpoint.
  std::set<int> closed_;
  clock::time_point next_reconnect_{};
  std::set<int> reported_lost_; ///< named in a "recovered" event already
  /// Per device: asks a loss interrupted whose reply is still to come.
  std::map<int, int> abandoned_;
  std::optional<planner::model_profile> profile_;
  /// Measured cluster (capabilities + link matrix), when links are measured.
  std::optional<planner::cluster> links_;
  planner::plan plan_;
  /// This job's id, drawn afresh by every run: what the nodes serve and
  /// every tensor names (job_claim.hpp).
  int64_t job_id_ = draw_job_id();
  /// The job's last step, the newest snapshot version it can write.
  int64_t last_step_ = 0;
  /// Devices this job holds (`claim`), released when it ends.
  std::set<int> claimed_;
  int generation_ = 0;
  /// The step whose loads the current generation's replicas already hold.
  std::optional<int64_t> fed_step_;
  /// (generation, step) of the last start sent ahead.
  std::optional<std::pair<int, int64_t>> started_ahead_;
  /// Reports of the step started ahead that arrived while the supervisor
  /// waited for the step before (generation, step, reports).
  struct early_reports {
    int generation = -1;
    int64_t step = -1;
    std::vector<json> reports;
  } early_;
  /// The running replicas by stage, as their stage actors reported them
  /// (the step loop addresses them directly).
  std::vector<std::vector<replica_ref>> stages_;
  /// The stage actors of the running plan, by layer range [first, end).
  std::map<std::pair<int, int>, stage_actor> stage_actors_;
  /// The last deployment's stage actors ({"stage", "layers", "actor",
  /// "reused"}: reused when the range kept its actor).
  json stage_actors_record_ = json::array();
  /// The current generation's micro-batch actors, by step, then micro-batch.
  std::map<int64_t, std::vector<micro_batch_actor>> micro_batches_;
  /// Takes the replicas' reports to them (spawned with the first step's
  /// actors; stopped with the supervisor).
  micro_batch_relay_actor micro_batch_relay_;
  /// Passes the relay took to the last finished step's actors (its record's
  /// `micro_batch_relayed`).
  int64_t micro_batch_relayed_ = 0;
  /// Replicas the last deployment kept running ({"replica", "actor",
  /// "restored_version"}: -1 when their state was kept as it was).
  std::vector<json> kept_;
  int num_replicas_ = 0;
  /// Members of the last deployment that rebuilt from a state this process
  /// sent over the data plane (send_states).
  int states_sent_ = 0;
  /// Snapshots read into this process by fetch_full_state since a recovery
  /// began (its record's `fetched_snapshots`).
  int fetched_snapshots_ = 0;
  std::shared_ptr<data_plane> plane_;
  bool plane_failed_ = false; ///< plane() could not start it: not tried again
  int64_t hb_round_ = 0;
  std::set<size_t> faults_fired_;
  std::map<int, clock::time_point> injected_at_;
  std::optional<clock::time_point> last_fault_; ///< last injected fault
  /// Set by a recovery: the next completed step emits "resumed".
  std::optional<clock::time_point> awaiting_resume_;
  /// The step a fault interrupted: its completion emits "caught_up".
  std::optional<int64_t> catch_up_step_;
  /// Per device: compute seconds per step right after a deployment.
  struct speed_track {
    int generation = -1;
    int seen = 0;
    std::vector<double> baseline;
    int streak = 0;
  };
  std::map<int, speed_track> speed_track_;
  /// Measured speed corrections (drift), multiplied into the cluster.
  std::vector<double> speed_scale_;
  /// Each node's speed timed at the start (measure_speeds), replacing the
  /// one its reported slowdown gives; empty when speeds are reported.
  std::vector<double> measured_speed_;
  /// Memory budget corrections (nodes over budget), multiplied into the
  /// cluster; and the peak that last triggered one, by device.
  std::vector<double> memory_scale_;
  std::map<int, int64_t> over_budget_peak_;
  /// A node is over budget but the next step ran ahead: decide at the next
  /// boundary, with nothing run ahead across it.
  bool memory_replan_due_ = false;
  int64_t checkpoint_step_ = -1;
  job_result result_;
};

} // namespace asteroid::actors::detail
