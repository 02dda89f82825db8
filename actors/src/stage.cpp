#include "asteroid/actors/stage.hpp"

#include "asteroid/actors/state_uploads.hpp"

#include "unexpected.hpp"
#include "upload_in_pieces.hpp"

#include <spdlog/spdlog.h>

#include <map>
#include <memory>
#include <set>

namespace asteroid::actors {

namespace {

using nlohmann::json;
using std::chrono::milliseconds;

using deploy_promise
  = caf::typed_response_promise<std::string, std::vector<caf::actor>, std::string>;

struct stage_actor_state {
  std::string label;
  /// The group of the last deployment, by replica index (a member may be
  /// null while its build is pending).
  std::vector<replica_actor> members;
  /// Where each member runs (its replica index, device and endpoint).
  std::vector<stage_peer> placement;
  /// Bumped by every deployment and by the stop: an answer for an earlier
  /// one is stale.
  uint64_t epoch = 0;
  /// Builds asked of each device (by index) and not yet answered: a stopped
  /// stage actor outlives them so that a replica handed over late is
  /// stopped, not left running...
  std::map<int, int> builds_pending;
  /// ...except on devices that will never answer: lost, as the supervisor
  /// says when it stops the actor, or whose connection closed.
  std::set<int> unreachable;
  /// Devices watched for a closed connection, by address.
  std::map<caf::actor_addr, int> watched;
  /// Numbers the stage states this actor sends in pieces.
  int64_t uploads = 0;
  bool stopping = false;
  static inline const char* name = "asteroid.stage";
};

using stage_self = stage_actor::stateful_pointer<stage_actor_state>;

/// One deployment in progress.
struct deployment_run {
  deploy_promise promise;
  uint64_t epoch = 0;
  stage_deployment plan;
  std::vector<caf::actor> devices;
  std::shared_ptr<const std::string> state;
  std::vector<caf::actor> replicas;
  std::vector<json> kept; ///< by member; null where the member is new
  int outstanding = 0;
  int restored_locally = 0, shipped = 0, rebuilt = 0;
  bool answered = false;

  void fail(const std::string& why) {
    if (answered)
      return;
    answered = true;
    promise.deliver(why, std::vector<caf::actor>{}, std::string("{}"));
  }
};

using run_ptr = std::shared_ptr<deployment_run>;

void quit_when_settled(stage_self self) {
  auto& st = self->state;
  if (!st.stopping)
    return;
  for (auto& [device, n] : st.builds_pending)
    if (n > 0 && !st.unreachable.count(device))
      return;
  self->quit();
}

bool stale(stage_self self, const run_ptr& run) {
  return self->state.stopping || run->epoch != self->state.epoch;
}

void member_ready(stage_self self, const run_ptr& run, size_t i, replica_actor r) {
  self->state.members[i] = r;
  run->replicas[i] = caf::actor_cast<caf::actor>(r);
  if (--run->outstanding > 0 || run->answered)
    return;
  run->answered = true;
  json kept = json::array();
  for (auto& k : run->kept)
    if (!k.is_null())
      kept.push_back(k);
  json report{{"kept", kept},
              {"restored_locally", run->restored_locally},
              {"shipped", run->shipped},
              {"rebuilt", run->rebuilt}};
  run->promise.deliver(std::string{}, run->replicas, report.dump());
}

std::string deploying(const run_ptr& run, size_t i) {
  const auto& m = run->plan.members[i];
  return "deploying stage " + std::to_string(run->plan.stage) + " replica "
         + std::to_string(m.replica) + " on " + m.spec.value("label", std::string{});
}

/// Watches member i's device: a closed connection ends the wait for it.
device_actor watch_device(stage_self self, const run_ptr& run, size_t i) {
  auto device = caf::actor_cast<device_actor>(run->devices[i]);
  if (self->state.watched.emplace(device.address(), run->plan.members[i].device).second)
    self->monitor(device);
  return device;
}

void ask_build(stage_self self, const run_ptr& run, size_t i, int64_t upload_id);

void build(stage_self self, const run_ptr& run, size_t i) {
  const bool local = run->plan.members[i].restore_version >= 0;
  if (local || static_cast<int64_t>(run->state->size()) <= state_piece_bytes)
    return ask_build(self, run, i, -1);
  // In pieces (state_uploads.hpp: as one message it would hold the
  // supervisor's heartbeats to that node back for as long as it crosses
  // the link), then the build that takes them.
  const auto id = ++self->state.uploads;
  detail::upload_in_pieces(
    self, watch_device(self, run, i), run->state, id,
    milliseconds(run->plan.members[i].build_timeout_ms),
    [=] {
      if (!stale(self, run))
        return true;
      quit_when_settled(self);
      return false;
    },
    [=](const std::string& err) {
      if (!err.empty())
        return run->fail(deploying(run, i) + ": " + err);
      ask_build(self, run, i, id);
    });
}

/// Asks member i's device for its replica, with the state in the message,
/// from the node's snapshots, or from upload `upload_id` (>= 0).
void ask_build(stage_self self, const run_ptr& run, size_t i, int64_t upload_id) {
  const auto& m = run->plan.members[i];
  auto spec = m.spec;
  bool local = m.restore_version >= 0;
  if (local)
    spec["restore_version"] = m.restore_version;
  if (upload_id >= 0)
    spec["state_upload"] = upload_id;
  auto what = deploying(run, i);
  auto device = watch_device(self, run, i);
  auto at = m.device;
  ++self->state.builds_pending[at];
  self
    ->request(device, milliseconds(m.build_timeout_ms), deploy_atom::value,
              spec.dump(), local || upload_id >= 0 ? std::string{} : *run->state)
    .then(
      [=](std::string& err, caf::actor& built) {
        --self->state.builds_pending[at];
        auto replica = caf::actor_cast<replica_actor>(built);
        if (stale(self, run)) {
          if (replica) // nobody will run it: the deployment was given up
            self->send(replica, stop_atom::value);
        } else if (!err.empty() || !replica) {
          run->fail(what + ": " + (err.empty() ? "no replica" : err));
        } else {
          ++(local ? run->restored_locally : run->shipped);
          member_ready(self, run, i, replica);
        }
        quit_when_settled(self);
      },
      [=](caf::error& e) {
        --self->state.builds_pending[at];
        if (!stale(self, run))
          run->fail(what + ": " + self->system().render(e));
        quit_when_settled(self);
      });
}

void reconfigure(stage_self self, const run_ptr& run, size_t i, replica_actor kept) {
  const auto& m = run->plan.members[i];
  auto label = m.spec.value("label", std::string{});
  self
    ->request(kept, milliseconds(m.build_timeout_ms), reconf_atom::value,
              m.spec.dump(), run->plan.version)
    .then(
      [=](std::string& err, int64_t restored) {
        if (stale(self, run))
          return; // the stop (or the next deployment) has dealt with it
        if (err.empty()) {
          run->kept[i] = json{{"replica", label},
                              {"actor", static_cast<int64_t>(kept.id())},
                              {"restored_version", restored}};
          member_ready(self, run, i, kept);
          return;
        }
        // It could not stay (no snapshot to roll back to): build it anew.
        spdlog::warn("{}; deploying a new replica instead", err);
        self->send(kept, stop_atom::value);
        self->state.members[i] = nullptr;
        ++run->rebuilt;
        build(self, run, i);
      },
      [=](caf::error& e) {
        if (!stale(self, run))
          run->fail("re-configuring " + label + ": " + self->system().render(e));
      });
}

stage_actor::behavior_type stage_fun(stage_self self, int stage, int first_layer,
                                     int end_layer) {
  self->state.label = "stage " + std::to_string(stage) + " (layers "
                      + std::to_string(first_layer) + "-"
                      + std::to_string(end_layer) + ")";
  detail::drop_unexpected(self, self->state.label);
  self->set_down_handler([=](caf::down_msg& dm) {
    auto it = self->state.watched.find(dm.source);
    if (it == self->state.watched.end())
      return;
    self->state.unreachable.insert(it->second);
    quit_when_settled(self);
  });
  auto stop = [=](const std::vector<int32_t>& lost) {
    auto& st = self->state;
    st.stopping = true;
    ++st.epoch;
    st.unreachable.insert(lost.begin(), lost.end());
    for (auto& r : st.members)
      if (r)
        self->send(r, stop_atom::value);
    st.members.clear();
    quit_when_settled(self);
  };
  return {
    [=](deploy_atom, const std::string& text, std::vector<caf::actor>& devices,
        std::string& state) -> deploy_promise {
      auto run = std::make_shared<deployment_run>();
      run->promise = self->make_response_promise<std::string, std::vector<caf::actor>,
                                                  std::string>();
      auto& st = self->state;
      try {
        run->plan = stage_deployment_from_json(json::parse(text));
      } catch (const std::exception& e) {
        run->fail(e.what());
        return run->promise;
      }
      const auto n = run->plan.members.size();
      if (devices.size() != n) {
        run->fail(st.label + ": " + std::to_string(devices.size())
                  + " device actors for " + std::to_string(n) + " members");
        return run->promise;
      }
      if (st.stopping) {
        run->fail(st.label + ": stopping");
        return run->promise;
      }
      run->epoch = ++st.epoch;
      run->devices = std::move(devices);
      run->state = std::make_shared<const std::string>(std::move(state));
      run->replicas.resize(n);
      run->kept.resize(n);
      run->outstanding = static_cast<int>(n);
      // Members that stay: the one running on a device the deployment
      // keeps. Every other one stops before anything new is built.
      std::vector<replica_actor> staying(n);
      std::set<size_t> taken;
      for (size_t i = 0; i < n; ++i) {
        if (!run->plan.members[i].keep)
          continue;
        for (size_t j = 0; j < st.members.size(); ++j)
          if (st.members[j] && st.placement[j].device == run->plan.members[i].device
              && taken.insert(j).second) {
            staying[i] = st.members[j];
            break;
          }
      }
      for (size_t j = 0; j < st.members.size(); ++j)
        if (st.members[j] && !taken.count(j))
          self->send(st.members[j], stop_atom::value);
      st.members = staying;
      st.placement.clear();
      for (auto& m : run->plan.members)
        st.placement.push_back({m.replica, m.device, m.endpoint});
      for (size_t i = 0; i < n; ++i) {
        if (staying[i])
          reconfigure(self, run, i, staying[i]);
        else
          build(self, run, i);
      }
      return run->promise;
    },
    [=](wire_atom, caf::actor& supervisor, std::vector<caf::actor>& prev,
        std::vector<caf::actor>& next, caf::actor& backup,
        const std::string& text) -> std::string {
      auto& st = self->state;
      stage_wiring w;
      try {
        w = stage_wiring_from_json(json::parse(text));
      } catch (const std::exception& e) {
        return e.what();
      }
      if (prev.size() != w.prev.size() || next.size() != w.next.size())
        return st.label + ": wiring names " + std::to_string(w.prev.size()) + "+"
               + std::to_string(w.next.size()) + " peers but carries "
               + std::to_string(prev.size()) + "+" + std::to_string(next.size());
      for (auto& r : st.members)
        if (!r)
          return st.label + ": wired before every member was deployed";
      const auto n = st.members.size();
      for (size_t i = 0; i < n; ++i) {
        auto& r = st.members[i];
        const auto& here = st.placement[i];
        auto link = [&](peer_role role, int index, const caf::actor& to,
                        const stage_peer& where) {
          self->send(r, peer_atom::value, int32_t{role}, static_cast<int32_t>(index),
                     to, link_route(here.device, here.endpoint, where));
        };
        self->send(r, peer_atom::value, int32_t{peer_supervisor}, int32_t{0},
                   supervisor, std::string{});
        for (size_t k = 0; k < prev.size(); ++k)
          link(peer_prev, w.prev[k].replica, prev[k], w.prev[k]);
        for (size_t k = 0; k < next.size(); ++k)
          link(peer_next, w.next[k].replica, next[k], w.next[k]);
        if (n > 1) {
          auto succ = (i + 1) % n;
          link(peer_ring_next, 0, caf::actor_cast<caf::actor>(st.members[succ]),
               st.placement[succ]);
        }
        if (i == 0 && backup && w.backup.device >= 0)
          link(peer_backup, 0, backup, w.backup);
      }
      return std::string{};
    },
    [=](stop_atom) { stop({}); },
    [=](stop_atom, std::vector<int32_t>& lost) { stop(lost); },
  };
}

} // namespace

stage_actor spawn_stage(caf::actor_system& sys, int stage, int first_layer,
                        int end_layer) {
  // Event-based and not detached: it waits on nodes, it never blocks.
  return sys.spawn(stage_fun, stage, first_layer, end_layer);
}

} // namespace asteroid::actors
