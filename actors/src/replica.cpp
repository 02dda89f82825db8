#include "asteroid/actors/replica.hpp"

#include "asteroid/actors/data_plane.hpp"
#include "asteroid/actors/protocol.hpp"
#include "asteroid/actors/stage_state.hpp"
#include "asteroid/kernels/bucket.hpp"
#include "asteroid/models/zoo.hpp"
#include "asteroid/planner/schedule.hpp"
#include "asteroid/serialization/tensor_wire.hpp"
#include "asteroid/training/model_options_json.hpp"
#include "asteroid/training/optimizer.hpp"

#include <spdlog/spdlog.h>

#include <chrono>
#include <ctime>
#include <map>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <tuple>

#include <sys/resource.h>

namespace asteroid::actors {

using nlohmann::json;

// -- spec ---------------------------------------------------------------------

json to_json(const replica_spec& s) {
  return json{{"model", s.model},
              {"model_options", s.model_options},
              {"stage", s.stage},
              {"num_stages", s.num_stages},
              {"replica", s.replica},
              {"first_layer", s.first_layer},
              {"end_layer", s.end_layer},
              {"batch_size", s.batch_size},
              {"micro_batches", s.micro_batches},
              {"shares", s.shares},
              {"prev_shares", s.prev_shares},
              {"next_shares", s.next_shares},
              {"schedule", s.schedule},
              {"optimizer",
               {{"kind", training::to_string(s.optimizer.kind)},
                {"lr", s.optimizer.lr},
                {"momentum", s.optimizer.momentum},
                {"weight_decay", s.optimizer.weight_decay}}},
              {"credit_window", s.credit_window},
              {"slowdown", s.slowdown},
              {"label", s.label},
              {"recv_timeout_ms", s.recv_timeout_ms},
              {"generation", s.generation},
              {"snapshot_every", s.snapshot_every}};
}

replica_spec replica_spec_from_json(const json& j) {
  try {
    replica_spec s;
    j.at("model").get_to(s.model);
    s.model_options = j.at("model_options");
    j.at("stage").get_to(s.stage);
    j.at("num_stages").get_to(s.num_stages);
    j.at("replica").get_to(s.replica);
    j.at("first_layer").get_to(s.first_layer);
    j.at("end_layer").get_to(s.end_layer);
    j.at("batch_size").get_to(s.batch_size);
    j.at("micro_batches").get_to(s.micro_batches);
    j.at("shares").get_to(s.shares);
    j.at("prev_shares").get_to(s.prev_shares);
    j.at("next_shares").get_to(s.next_shares);
    j.at("schedule").get_to(s.schedule);
    const auto& o = j.at("optimizer");
    s.optimizer.kind = training::parse_optimizer(o.at("kind").get<std::string>());
    o.at("lr").get_to(s.optimizer.lr);
    o.at("momentum").get_to(s.optimizer.momentum);
    o.at("weight_decay").get_to(s.optimizer.weight_decay);
    j.at("credit_window").get_to(s.credit_window);
    j.at("slowdown").get_to(s.slowdown);
    j.at("label").get_to(s.label);
    j.at("recv_timeout_ms").get_to(s.recv_timeout_ms);
    s.generation = j.value("generation", 0);
    s.snapshot_every = j.value("snapshot_every", int64_t{0});
    if (s.snapshot_every < 0)
      throw std::invalid_argument("snapshot_every must be >= 0");
    if (s.num_stages < 1 || s.stage < 0 || s.stage >= s.num_stages)
      throw std::invalid_argument("stage " + std::to_string(s.stage)
                                  + " out of range");
    if (s.replica < 0 || s.replica >= static_cast<int>(s.shares.size()))
      throw std::invalid_argument("replica " + std::to_string(s.replica)
                                  + " out of range");
    if (s.micro_batches < 1 || s.batch_size < s.micro_batches)
      throw std::invalid_argument("bad batch size / micro-batch count");
    if ((s.stage > 0) == s.prev_shares.empty()
        || (s.stage + 1 < s.num_stages) == s.next_shares.empty())
      throw std::invalid_argument("neighbour shares do not match the stage");
    if (s.credit_window < 1)
      throw std::invalid_argument("credit_window must be >= 1");
    if (s.slowdown < 1.0)
      throw std::invalid_argument("slowdown must be >= 1");
    return s;
  } catch (const json::exception& e) {
    throw std::invalid_argument(std::string("replica spec: ") + e.what());
  } catch (const std::invalid_argument& e) {
    std::string what = e.what();
    if (what.rfind("replica spec:", 0) == 0)
      throw;
    throw std::invalid_argument("replica spec: " + what);
  }
}

// -- model factories ----------------------------------------------------------

namespace {

std::mutex factories_mutex;

std::map<std::string,
         std::function<models::sequential_model(const json&)>>& factories() {
  static std::map<std::string,
                  std::function<models::sequential_model(const json&)>> m;
  return m;
}

} // namespace

void register_model_factory(
  const std::string& name,
  std::function<models::sequential_model(const json&)> factory) {
  std::lock_guard<std::mutex> guard{factories_mutex};
  factories()[name] = std::move(factory);
}

models::sequential_model build_model(const std::string& name,
                                     const json& options) {
  {
    std::lock_guard<std::mutex> guard{factories_mutex};
    auto i = factories().find(name);
    if (i != factories().end())
      return i->second(options);
  }
  return models::make_model(name, training::model_options_from_json(options));
}

// -- the replica actor ----------------------------------------------------------

namespace {

using planner::op;

double wall_us() {
  return std::chrono::duration<double, std::micro>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

struct span {
  int64_t begin = 0;
  int64_t end = 0;
  bool empty() const { return end <= begin; }
};

std::vector<span> spans(const std::vector<int64_t>& shares) {
  std::vector<span> out;
  int64_t at = 0;
  for (auto s : shares) {
    out.push_back({at, at + s});
    at += s;
  }
  return out;
}

span overlap(span a, span b) {
  return {std::max(a.begin, b.begin), std::min(a.end, b.end)};
}

/// The LibTorch half of a replica: model range, optimizer, stream.
struct engine {
  replica_spec spec;
  models::sequential_model model{nullptr};
  std::vector<torch::Tensor> params;
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  std::vector<planner::instruction> stream;
  bool first = false;
  bool last = false;
  span mine;
  std::vector<span> prev;
  std::vector<span> next;
  /// This process's data plane (null: every tensor rides in CAF messages).
  std::shared_ptr<data_plane> dp;
};

struct replica_state {
  std::shared_ptr<engine> e;
  std::vector<caf::actor> prev;
  std::vector<caf::actor> next;
  caf::actor ring_next;
  caf::actor supervisor;
  caf::actor home;   ///< this node's device actor: local snapshots
  caf::actor backup; ///< the device keeping this stage's replica
  /// Data-plane endpoints of peers, by (peer_role, index) (`ast_route`);
  /// a peer without one gets its tensors in CAF messages.
  std::map<std::pair<int, int>, std::string> routes;

  // -- the step being executed --
  int64_t step = -1;
  bool running = false;
  bool failed = false;
  size_t pc = 0;
  std::set<int64_t> starts;
  std::map<int64_t, std::string> loads;
  bool loaded = false;
  std::vector<torch::Tensor> x, y, in, out, grad_out;
  std::map<std::tuple<int64_t, int, int>, torch::Tensor> acts, grads;
  std::map<std::pair<int64_t, int>, torch::Tensor> ar_in;
  std::vector<int> unacked_next, unacked_prev;
  std::set<int> served; // receivers already served by the current send
  int ar_k = -1;
  torch::Tensor ar_flat;
  std::vector<kernels::bucket> ar_buckets;
  std::vector<torch::Tensor> ar_grads;

  /// The newest version this replica has sent a snapshot of (-1: none).
  int64_t snapshotted = -1;

  // -- metrics of the step (reset when its report is sent: a snapshot taken
  // after the report counts in the next one) --
  double step_start_us = 0;
  double busy_s = 0;
  double overrun_s = 0; ///< compute beyond the emulated time (compute())
  double loss = 0;
  json events = json::array();
  std::map<std::string, int64_t> bytes;
  int max_unacked = 0;
  std::chrono::steady_clock::time_point blocked_since;
  bool blocked = false;
};

using replica_actor = caf::stateful_actor<replica_state>;

std::string name_of(const engine& e) {
  return e.spec.label.empty() ? "s" + std::to_string(e.spec.stage) + "r"
                                  + std::to_string(e.spec.replica)
                              : e.spec.label;
}

std::string link_name(int s0, int r0, int s1, int r1) {
  return "s" + std::to_string(s0) + "r" + std::to_string(r0) + "->s"
         + std::to_string(s1) + "r" + std::to_string(r1);
}

void fail(replica_actor* self, const std::string& what) {
  auto& st = self->state;
  auto msg = name_of(*st.e) + ": " + what;
  spdlog::error("{}", msg);
  st.failed = true;
  st.running = false;
  if (st.supervisor)
    self->send(st.supervisor, fail_atom::value,
               static_cast<int32_t>(st.e->spec.generation), msg);
}

/// CPU time of the calling thread, in seconds.
double thread_cpu_s() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

/// What slowed a compute besides the work itself, for the trace: the calling
/// thread's system time, page faults and involuntary context switches. Read
/// with getrusage, whose times are only microseconds; the padding keeps using
/// thread_cpu_s.
struct thread_interference {
  double sys_ms = 0;
  long minflt = 0;
  long nivcsw = 0;

  static thread_interference now() {
    rusage ru{};
    ::getrusage(RUSAGE_THREAD, &ru);
    return {static_cast<double>(ru.ru_stime.tv_sec) * 1e3
              + static_cast<double>(ru.ru_stime.tv_usec) * 1e-3,
            ru.ru_minflt, ru.ru_nivcsw};
  }
};

/// Runs `f`, pads it to what the emulated device would have taken, records a
/// trace event. The emulated time is `slowdown` × the thread's CPU time when
/// LibTorch computes on this one thread (nodes default to `--threads 1`), else
/// × the wall time. CPU time, because emulated devices share this machine's
/// cores: while another node's process held the core this thread was not
/// computing, a separate device would not have lost that time, and padding a
/// multiple of it would stretch the host's contention `slowdown` times (the
/// pipelines of throughput_bench computed on a core 46-72 % of their wall
/// time). Where the compute already took longer than the emulated time (an
/// overloaded host), nothing is padded and the excess is reported as
/// `overrun_s`: the emulation was slower than the device it stands for.
/// `busy_s` adds up the device's time (the emulated one), the trace shows
/// the time the host took.
/// Without emulation the time is the wall time: a real device that another
/// program slows down is slower, and drift detection must see it.
template <class F>
void compute(replica_actor* self, const std::string& name, F&& f) {
  auto& st = self->state;
  const double slowdown = st.e->spec.slowdown;
  const bool own_core = at::get_num_threads() == 1;
  auto t0 = std::chrono::steady_clock::now();
  auto cpu0 = thread_cpu_s();
  auto start_us = wall_us();
  auto in0 = thread_interference::now();
  f();
  auto cpu = thread_cpu_s() - cpu0;
  auto in1 = thread_interference::now();
  auto dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
              .count();
  auto device_s = dt; // what the device took
  if (slowdown > 1.0) {
    device_s = slowdown * (own_core ? cpu : dt);
    if (device_s >= dt)
      std::this_thread::sleep_for(std::chrono::duration<double>(device_s - dt));
    else
      st.overrun_s += dt - device_s;
  }
  st.busy_s += device_s;
  st.events.push_back({{"name", name}, {"ts", start_us},
                       {"dur", std::max(dt, device_s) * 1e6},
                       {"wall_ms", dt * 1e3}, {"cpu_ms", cpu * 1e3},
                       {"minflt", in1.minflt - in0.minflt},
                       {"nivcsw", in1.nivcsw - in0.nivcsw},
                       {"sys_ms", in1.sys_ms - in0.sys_ms}});
}

/// Sends `bytes` to peer (`role`, `index`) = `to`: on the data plane when the
/// supervisor gave a route to it, else as the CAF message `via_caf` sends.
template <class ViaCaf>
void transmit(replica_actor* self, int role, int index, const caf::actor& to,
              serialization::frame_header h, std::string key,
              std::string bytes, ViaCaf&& via_caf) {
  auto& st = self->state;
  auto route = st.routes.find({role, index});
  if (!st.e->dp || route == st.routes.end()) {
    via_caf(std::move(key), std::move(bytes));
    return;
  }
  h.destination = to.id();
  if (!st.e->dp->send(route->second, h, std::move(key), std::move(bytes)))
    fail(self, "data plane: frame to " + route->second
                 + " dropped (its queue stayed full)");
}

void send_bytes(replica_actor* self, const caf::actor& to, int index,
                bool activation, int mb, const torch::Tensor& t,
                const std::string& link) {
  auto& st = self->state;
  auto bytes = serialization::encode_tensor(t);
  st.bytes[link] += static_cast<int64_t>(bytes.size());
  serialization::frame_header h;
  h.kind = activation ? serialization::frame_kind::activation
                      : serialization::frame_kind::gradient;
  h.step = st.step;
  h.a = static_cast<int32_t>(mb);
  h.b = static_cast<int32_t>(st.e->spec.replica);
  transmit(self, activation ? peer_next : peer_prev, index, to, h, {},
           std::move(bytes), [&](std::string, std::string b) {
             if (activation)
               self->send(to, act_atom::value, h.step, h.a, h.b, std::move(b));
             else
               self->send(to, grad_atom::value, h.step, h.a, h.b, std::move(b));
           });
}

/// Sends my rows of `t` (rows of `mine`) to each peer whose span overlaps,
/// within the credit window; returns false while some peer lacks credit.
bool send_pieces(replica_actor* self, bool activation, int mb,
                 const torch::Tensor& t) {
  auto& st = self->state;
  auto& e = *st.e;
  const auto& peers_span = activation ? e.next : e.prev;
  auto& peers = activation ? st.next : st.prev;
  auto& unacked = activation ? st.unacked_next : st.unacked_prev;
  int peer_stage = e.spec.stage + (activation ? 1 : -1);
  for (size_t q = 0; q < peers_span.size(); ++q) {
    auto ov = overlap(e.mine, peers_span[q]);
    if (ov.empty() || st.served.count(static_cast<int>(q)))
      continue;
    if (unacked[q] >= e.spec.credit_window)
      return false;
    if (!peers[q])
      throw std::runtime_error("no handle for replica " + std::to_string(q)
                               + " of stage " + std::to_string(peer_stage));
    auto piece = t.slice(0, ov.begin - e.mine.begin, ov.end - e.mine.begin);
    send_bytes(self, peers[q], static_cast<int>(q), activation, mb, piece,
               link_name(e.spec.stage, e.spec.replica, peer_stage,
                         static_cast<int>(q)));
    ++unacked[q];
    st.max_unacked = std::max(st.max_unacked, unacked[q]);
    st.served.insert(static_cast<int>(q));
  }
  st.served.clear();
  return true;
}

/// Collects the pieces of micro-batch `mb` from the peers overlapping my
/// span; returns an undefined tensor while some are missing.
torch::Tensor take_pieces(replica_actor* self, bool activation, int mb) {
  auto& st = self->state;
  auto& e = *st.e;
  const auto& peers_span = activation ? e.prev : e.next;
  auto& store = activation ? st.acts : st.grads;
  std::vector<int> from;
  for (size_t r = 0; r < peers_span.size(); ++r)
    if (!overlap(e.mine, peers_span[r]).empty()) {
      if (!store.count({st.step, mb, static_cast<int>(r)}))
        return {};
      from.push_back(static_cast<int>(r));
    }
  std::vector<torch::Tensor> parts;
  for (int r : from) {
    auto key = std::make_tuple(st.step, mb, r);
    parts.push_back(store[key]);
    store.erase(key);
    auto& peer = activation ? st.prev[r] : st.next[r];
    self->send(peer, ack_atom::value, static_cast<int32_t>(activation ? 0 : 1),
               static_cast<int32_t>(e.spec.replica));
  }
  return parts.size() == 1 ? parts[0] : torch::cat(parts, 0);
}

std::pair<int64_t, int64_t> chunk(int64_t numel, int n, int i) {
  i = ((i % n) + n) % n;
  return {numel * i / n, numel * (i + 1) / n};
}

void send_chunk(replica_actor* self, int k, int idx) {
  auto& st = self->state;
  auto n = static_cast<int>(st.e->spec.shares.size());
  auto [b, en] = chunk(st.ar_flat.numel(), n, idx);
  auto bytes = serialization::encode_tensor(st.ar_flat.slice(0, b, en));
  st.bytes["ar " + link_name(st.e->spec.stage, st.e->spec.replica,
                             st.e->spec.stage,
                             (st.e->spec.replica + 1) % n)]
    += static_cast<int64_t>(bytes.size());
  serialization::frame_header h;
  h.kind = serialization::frame_kind::all_reduce;
  h.step = st.step;
  h.a = static_cast<int32_t>(k);
  transmit(self, peer_ring_next, 0, st.ring_next, h, {}, std::move(bytes),
           [&](std::string, std::string b) {
             self->send(st.ring_next, ar_atom::value, h.step, h.a, std::move(b));
           });
}

/// One ring all-reduce, resumable: returns false while waiting for a chunk.
bool all_reduce(replica_actor* self) {
  auto& st = self->state;
  auto& e = *st.e;
  auto n = static_cast<int>(e.spec.shares.size());
  auto r = e.spec.replica;
  if (st.ar_k < 0) {
    st.ar_grads.clear();
    for (auto& p : e.params) {
      if (!p.grad().defined())
        p.mutable_grad() = torch::zeros_like(p);
      st.ar_grads.push_back(p.grad());
    }
    if (n == 1)
      return true;
    compute(self, "FLATTEN", [&] {
      st.ar_buckets = kernels::flatten_into_buckets(st.ar_grads,
                                                    int64_t{1} << 40);
      std::vector<torch::Tensor> flats;
      for (auto& b : st.ar_buckets)
        flats.push_back(b.flat);
      st.ar_flat = flats.size() == 1 ? flats[0].clone() : torch::cat(flats);
    });
    if (!st.ring_next)
      throw std::runtime_error("no ring successor for the all-reduce");
    st.ar_k = 0;
    send_chunk(self, 0, r);
  }
  while (st.ar_k < 2 * n - 2) {
    auto key = std::make_pair(st.step, st.ar_k);
    auto i = st.ar_in.find(key);
    if (i == st.ar_in.end())
      return false;
    auto recv = i->second;
    st.ar_in.erase(i);
    auto k = st.ar_k;
    int idx = k < n - 1 ? r - k - 1 : r - (k - (n - 1));
    auto [b, en] = chunk(st.ar_flat.numel(), n, idx);
    auto dst = st.ar_flat.slice(0, b, en);
    if (recv.numel() != dst.numel() || recv.scalar_type() != dst.scalar_type())
      throw std::runtime_error("all-reduce chunk " + std::to_string(k)
                               + " has " + std::to_string(recv.numel())
                               + " elements, expected "
                               + std::to_string(dst.numel()));
    compute(self, "AR k=" + std::to_string(k), [&] {
      if (k < n - 1)
        dst.add_(recv.view_as(dst));
      else
        dst.copy_(recv.view_as(dst));
    });
    ++st.ar_k;
    if (st.ar_k < 2 * n - 2) {
      auto nk = st.ar_k;
      int send_idx = nk < n - 1 ? r - nk : r + 1 - (nk - (n - 1));
      send_chunk(self, nk, send_idx);
    }
  }
  // Copy back into the gradients.
  int64_t at = 0;
  for (auto& b : st.ar_buckets) {
    b.flat.copy_(st.ar_flat.slice(0, at, at + b.flat.numel()));
    at += b.flat.numel();
  }
  kernels::unflatten_from_buckets(st.ar_buckets, st.ar_grads);
  st.ar_buckets.clear();
  st.ar_flat = torch::Tensor();
  return true;
}

void snapshot(replica_actor* self, int64_t version);

void finish_step(replica_actor* self) {
  auto& st = self->state;
  auto& e = *st.e;
  json report{{"stage", e.spec.stage},
              {"replica", e.spec.replica},
              {"generation", e.spec.generation},
              {"label", name_of(e)},
              {"busy_s", st.busy_s},
              {"overrun_s", st.overrun_s},
              {"wall_s", (wall_us() - st.step_start_us) * 1e-6},
              {"start_us", st.step_start_us},
              {"loss", st.loss},
              {"max_unacked", st.max_unacked},
              {"bytes", st.bytes},
              {"events", std::move(st.events)}};
  self->send(st.supervisor, done_atom::value, st.step, report.dump());
  st.busy_s = 0;
  st.overrun_s = 0;
  st.events = json::array();
  st.loads.erase(st.step);
  st.starts.erase(st.step);
  st.running = false;
  st.loaded = false;
  st.pc = 0;
  st.x.clear();
  st.y.clear();
  st.in.clear();
  st.out.clear();
  st.grad_out.clear();
  // The state now is the state before the next step. Without run-ahead it is
  // taken while the report travels to the supervisor and the next start
  // comes back; with the next start already here (run-ahead) the next step
  // begins after it, which still beats waiting for that round trip.
  auto next = st.step + 1;
  if (e.spec.snapshot_every > 0 && next % e.spec.snapshot_every == 0)
    snapshot(self, next);
}

/// Sends the state before step `version` to the home device and, from
/// replica 0, to the backup device. Group members hold identical weights, so
/// one copy outside the group suffices. The sends are asynchronous: the
/// pipeline only pays for the copy and the encoding.
void snapshot(replica_actor* self, int64_t version) {
  auto& st = self->state;
  auto& e = *st.e;
  st.snapshotted = version;
  std::string bytes;
  compute(self, "SNAPSHOT", [&] {
    bytes = serialization::encode_tensors(capture_stage_state(
      e.model, e.spec.first_layer, e.spec.end_layer, e.optimizer.get()));
  });
  auto key = range_key(e.spec.first_layer, e.spec.end_layer);
  if (e.spec.replica == 0 && st.backup) {
    serialization::frame_header h;
    h.kind = serialization::frame_kind::snapshot;
    h.step = version;
    transmit(self, peer_backup, 0, st.backup, h, key, bytes,
             [&](std::string k, std::string b) {
               self->send(st.backup, snap_atom::value, std::move(k), h.step,
                          std::move(b));
             });
  }
  if (st.home)
    self->send(st.home, snap_atom::value, key, version, std::move(bytes));
}

/// Executes instructions until one blocks or the step ends.
void advance(replica_actor* self) {
  auto& st = self->state;
  if (st.failed)
    return;
  try {
    auto& e = *st.e;
    auto M = e.spec.micro_batches;
    if (!st.running) {
      if (st.starts.empty() || !st.supervisor)
        return;
      st.step = *st.starts.begin();
      st.running = true;
      st.pc = 0;
      st.ar_k = -1;
      st.loss = 0;
      st.bytes.clear();
      st.max_unacked = 0;
      st.step_start_us = wall_us();
      st.in.assign(M, {});
      st.out.assign(M, {});
      st.grad_out.assign(M, {});
      for (auto& p : e.params)
        if (p.grad().defined())
          p.mutable_grad().zero_();
      // The first step of a deployment (the previous one was not this
      // replica's) snapshots here, the others at the end of their previous.
      if (e.spec.snapshot_every > 0 && st.step % e.spec.snapshot_every == 0
          && st.snapshotted != st.step)
        snapshot(self, st.step);
    }
    while (st.pc < e.stream.size()) {
      const auto& ins = e.stream[st.pc];
      auto mb = ins.micro_batch;
      bool done = true;
      switch (ins.kind) {
        case op::load_micro_batch: {
          if (!st.loaded) {
            auto i = st.loads.find(st.step);
            if (i == st.loads.end()) {
              done = false;
              break;
            }
            auto list = serialization::decode_tensors(i->second);
            st.x.assign(M, {});
            st.y.assign(M, {});
            for (auto& [name, t] : list) {
              if (name.size() < 2 || (name[0] != 'x' && name[0] != 'y'))
                throw std::runtime_error("load: unexpected entry '" + name
                                         + "'");
              auto m = std::stoi(name.substr(1));
              if (m < 0 || m >= M || t.size(0) != e.mine.end - e.mine.begin)
                throw std::runtime_error("load: entry '" + name
                                         + "' has the wrong micro-batch or "
                                           "row count");
              (name[0] == 'x' ? st.x : st.y)[m] = t;
            }
            st.loaded = true;
          }
          if ((e.first && !st.x[mb].defined())
              || (e.last && !st.y[mb].defined()))
            throw std::runtime_error("load: micro-batch "
                                     + std::to_string(mb) + " missing");
          break;
        }
        case op::recv_activation: {
          if (e.mine.empty())
            break;
          auto t = take_pieces(self, true, mb);
          if (!t.defined()) {
            done = false;
            break;
          }
          st.in[mb] = t.detach().requires_grad_(true);
          break;
        }
        case op::forward: {
          if (e.mine.empty())
            break;
          auto input = e.first ? st.x[mb] : st.in[mb];
          compute(self, "FWD mb=" + std::to_string(mb), [&] {
            st.out[mb] = e.model->forward_range(input, e.spec.first_layer,
                                                e.spec.end_layer);
          });
          break;
        }
        case op::send_activation:
          if (!e.mine.empty())
            done = send_pieces(self, true, mb, st.out[mb].detach());
          break;
        case op::recv_grad: {
          if (e.mine.empty())
            break;
          auto t = take_pieces(self, false, mb);
          if (!t.defined()) {
            done = false;
            break;
          }
          if (t.sizes() != st.out[mb].sizes())
            throw std::runtime_error("gradient of micro-batch "
                                     + std::to_string(mb)
                                     + " has the wrong shape");
          st.grad_out[mb] = t;
          break;
        }
        case op::backward: {
          if (e.mine.empty())
            break;
          compute(self, "BWD mb=" + std::to_string(mb), [&] {
            if (e.last) {
              // Sum over my rows / mini-batch size: the sum over replicas and
              // micro-batches is the mini-batch mean, so gradients just add.
              auto loss = torch::nn::functional::cross_entropy(
                            st.out[mb], st.y[mb],
                            torch::nn::functional::CrossEntropyFuncOptions()
                              .reduction(torch::kSum))
                          / static_cast<double>(e.spec.batch_size);
              st.loss += loss.item<double>();
              loss.backward();
            } else {
              st.out[mb].backward(st.grad_out[mb]);
            }
          });
          st.out[mb] = torch::Tensor();
          st.grad_out[mb] = torch::Tensor();
          break;
        }
        case op::send_grad:
          if (!e.mine.empty()) {
            auto g = st.in[mb].grad();
            if (!g.defined())
              g = torch::zeros_like(st.in[mb]);
            done = send_pieces(self, false, mb, g);
            if (done)
              st.in[mb] = torch::Tensor();
          }
          break;
        case op::all_reduce:
          done = all_reduce(self);
          break;
        case op::optimizer_step:
          compute(self, "STEP", [&] { e.optimizer->step(); });
          break;
      }
      if (!done) {
        if (!st.blocked) {
          st.blocked = true;
          st.blocked_since = std::chrono::steady_clock::now();
        }
        return;
      }
      st.blocked = false;
      ++st.pc;
    }
    finish_step(self);
    // A start for the next step may already be waiting.
    if (!st.starts.empty())
      advance(self);
  } catch (const std::exception& ex) {
    fail(self, std::string("step ") + std::to_string(st.step) + ": "
                 + ex.what());
  }
}

bool check_index(replica_actor* self, int32_t i, size_t n, const char* what) {
  if (i < 0 || static_cast<size_t>(i) >= n) {
    spdlog::error("{}: dropped {} from unknown replica {}",
                  name_of(*self->state.e), what, i);
    return false;
  }
  return true;
}

caf::behavior replica_fun(replica_actor* self, std::shared_ptr<engine> e) {
  // This runs on the replica's own thread: OpenMP's thread count is per
  // thread, so apply the process's setting (`asteroid node --threads`) here,
  // or LibTorch uses every core and fights the other processes for them.
  at::init_num_threads();
  self->state.e = e;
  auto& st = self->state;
  st.prev.resize(e->prev.size());
  st.next.resize(e->next.size());
  st.unacked_prev.assign(e->prev.size(), 0);
  st.unacked_next.assign(e->next.size(), 0);
  self->set_down_handler([=](caf::down_msg& dm) {
    if (dm.source == self->state.supervisor.address()) {
      spdlog::info("{}: supervisor went down, quitting", name_of(*e));
      self->quit();
    }
  });
  self->set_default_handler(
    [](caf::scheduled_actor* ptr, caf::message_view& x) -> caf::result<caf::message> {
      spdlog::error("replica: unexpected message {}",
                    caf::to_string(x.content()));
      (void) ptr;
      return caf::sec::unexpected_message;
    });
  self->delayed_send(self, std::chrono::seconds(1), caf::tick_atom::value);
  auto store = [=](bool activation, int64_t step, int32_t mb, int32_t from,
                   const std::string& bytes) {
    auto& s = self->state;
    const char* what = activation ? "activation" : "gradient";
    if (!check_index(self, from, activation ? e->prev.size() : e->next.size(),
                     what))
      return;
    if (mb < 0 || mb >= e->spec.micro_batches
        || step < (s.running ? s.step : s.step + 1)) {
      spdlog::error("{}: dropped {} for step {} micro-batch {}", name_of(*e),
                    what, step, mb);
      return;
    }
    torch::Tensor t;
    try {
      t = serialization::decode_tensor(bytes);
    } catch (const std::exception& ex) {
      spdlog::error("{}: dropped malformed {} from replica {}: {}",
                    name_of(*e), what, from, ex.what());
      return;
    }
    auto span_from = (activation ? e->prev : e->next)[from];
    auto ov = overlap(e->mine, span_from);
    if (t.dim() < 1 || t.size(0) != ov.end - ov.begin) {
      spdlog::error("{}: dropped {} with {} rows from replica {} (expected {})",
                    name_of(*e), what, t.dim() < 1 ? -1 : t.size(0), from,
                    ov.end - ov.begin);
      return;
    }
    (activation ? s.acts : s.grads)[{step, mb, from}] = t;
    advance(self);
  };
  return {
    [=](peer_atom, int32_t role, int32_t index, caf::actor peer) {
      auto& s = self->state;
      switch (role) {
        case peer_prev:
          if (check_index(self, index, s.prev.size(), "peer"))
            s.prev[index] = peer;
          break;
        case peer_next:
          if (check_index(self, index, s.next.size(), "peer"))
            s.next[index] = peer;
          break;
        case peer_ring_next:
          s.ring_next = peer;
          break;
        case peer_supervisor:
          s.supervisor = peer;
          self->monitor(peer);
          break;
        case peer_backup:
          s.backup = peer;
          break;
        case peer_home:
          s.home = peer;
          break;
        default:
          spdlog::error("{}: unknown peer role {}", name_of(*e), role);
      }
    },
    [=](route_atom, int32_t role, int32_t index, const std::string& endpoint) {
      try {
        parse_endpoint(endpoint);
      } catch (const std::exception& ex) {
        spdlog::error("{}: ignored route: {}", name_of(*e), ex.what());
        return;
      }
      self->state.routes[{role, index}] = endpoint;
    },
    [=](load_atom, int64_t step, std::string& payload) {
      self->state.loads[step] = std::move(payload);
      advance(self);
    },
    [=](start_atom, int64_t step) {
      self->state.starts.insert(step);
      advance(self);
    },
    [=](act_atom, int64_t step, int32_t mb, int32_t from,
        const std::string& bytes) { store(true, step, mb, from, bytes); },
    [=](grad_atom, int64_t step, int32_t mb, int32_t from,
        const std::string& bytes) { store(false, step, mb, from, bytes); },
    [=](ack_atom, int32_t kind, int32_t from) {
      auto& s = self->state;
      auto& v = kind == 0 ? s.unacked_next : s.unacked_prev;
      if (!check_index(self, from, v.size(), "ack") || v[from] <= 0) {
        spdlog::error("{}: unexpected ack", name_of(*e));
        return;
      }
      --v[from];
      advance(self);
    },
    [=](ar_atom, int64_t step, int32_t k, const std::string& bytes) {
      try {
        self->state.ar_in[{step, k}] = serialization::decode_tensor(bytes);
      } catch (const std::exception& ex) {
        spdlog::error("{}: dropped malformed all-reduce chunk: {}",
                      name_of(*e), ex.what());
        return;
      }
      advance(self);
    },
    [=](state_atom) -> std::string {
      return serialization::encode_tensors(capture_stage_state(
        e->model, e->spec.first_layer, e->spec.end_layer, e->optimizer.get()));
    },
    [=](slow_atom, int32_t permille) {
      if (permille >= 1000)
        e->spec.slowdown = permille / 1000.0;
      else
        spdlog::error("{}: ignored slowdown {} permille", name_of(*e), permille);
    },
    [=](caf::tick_atom) {
      auto& s = self->state;
      if (s.running && s.blocked && !s.failed) {
        auto waited = std::chrono::steady_clock::now() - s.blocked_since;
        if (waited > std::chrono::milliseconds(e->spec.recv_timeout_ms))
          fail(self, "step " + std::to_string(s.step) + ": waited "
                       + std::to_string(e->spec.recv_timeout_ms)
                       + " ms at "
                       + planner::to_string(e->stream[s.pc]));
      }
      self->delayed_send(self, std::chrono::seconds(1), caf::tick_atom::value);
    },
    [=](stop_atom) { self->quit(); },
  };
}

} // namespace

caf::actor spawn_replica(caf::actor_system& sys, const replica_spec& spec,
                         const std::string& state, caf::actor home,
                         std::shared_ptr<data_plane> dp) {
  auto e = std::make_shared<engine>();
  e->spec = spec;
  e->dp = dp;
  e->model = build_model(spec.model, spec.model_options);
  if (spec.first_layer < 0 || spec.end_layer > e->model->size()
      || spec.first_layer >= spec.end_layer)
    throw std::invalid_argument(
      "replica spec: layers [" + std::to_string(spec.first_layer) + ", "
      + std::to_string(spec.end_layer) + ") do not fit model '" + spec.model
      + "' of " + std::to_string(e->model->size()) + " layers");
  e->model->train();
  e->params = e->model->range_parameters(spec.first_layer, spec.end_layer);
  e->optimizer = training::make_optimizer(spec.optimizer, e->params);
  load_stage_state(e->model, spec.first_layer, spec.end_layer,
                   e->optimizer.get(), serialization::decode_tensors(state));
  e->stream = planner::find_schedule(spec.schedule)
                .stream(spec.stage, spec.num_stages, spec.micro_batches);
  e->first = spec.stage == 0;
  e->last = spec.stage + 1 == spec.num_stages;
  auto mine = spans(spec.shares);
  e->mine = mine[spec.replica];
  e->prev = spans(spec.prev_shares);
  e->next = spans(spec.next_shares);
  auto r = sys.spawn<caf::detached>(replica_fun, e);
  if (dp)
    dp->add_sink(r);
  if (home)
    caf::anon_send(r, peer_atom::value, int32_t{peer_home}, int32_t{0}, home);
  return r;
}

} // namespace asteroid::actors
