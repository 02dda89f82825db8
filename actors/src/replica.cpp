// The replica actor's shell: its message handlers and how it is spawned. The
// work its handlers trigger lives in stage_executor.cpp (the stream),
// replica_links.cpp (sends, receives, credits), ring_all_reduce.cpp and
// device_clock.cpp.
#include "asteroid/actors/replica.hpp"

#include "asteroid/actors/data_plane.hpp"
#include "asteroid/actors/protocol.hpp"
#include "asteroid/actors/replica_footprint.hpp"
#include "asteroid/actors/stage_state.hpp"
#include "asteroid/actors/state_uploads.hpp"
#include "asteroid/actors/wire_compression.hpp"
#include "asteroid/kernels/compute_device.hpp"
#include "asteroid/serialization/tensor_wire.hpp"
#include "asteroid/training/model_registry.hpp"
#include "asteroid/training/optimizer.hpp"
#include "replica_state.hpp"
#include "replica_reconfigure.hpp"
#include "stage_executor.hpp"
#include "unexpected.hpp"

#include <spdlog/spdlog.h>

#include <chrono>
#include <stdexcept>

namespace asteroid::actors {

namespace detail {

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

std::string name_of(const engine& e) {
  return e.spec.label.empty() ? "s" + std::to_string(e.spec.stage) + "r"
                                  + std::to_string(e.spec.replica)
                              : e.spec.label;
}

std::string link_name(int s0, int r0, int s1, int r1) {
  return "s" + std::to_string(s0) + "r" + std::to_string(r0) + "->s"
         + std::to_string(s1) + "r" + std::to_string(r1);
}

void fail(replica_self* self, const std::string& what) {
  auto& st = self->state;
  auto msg = name_of(*st.e) + ": " + what;
  spdlog::error("{}", msg);
  st.failed = true;
  st.running = false;
  if (st.supervisor)
    self->send(st.supervisor, fail_atom::value, static_cast<int32_t>(st.e->spec.generation),
               msg);
}

} // namespace detail

namespace {

using namespace detail;

bool check_index(replica_self* self, int32_t i, size_t n, const char* what) {
  if (i < 0 || static_cast<size_t>(i) >= n) {
    spdlog::error("{}: dropped {} from unknown replica {}",
                  name_of(*self->state.e), what, i);
    return false;
  }
  return true;
}

replica_actor::behavior_type replica_fun(replica_self* self,
                                         std::shared_ptr<engine> e) {
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
  drop_unexpected(self, name_of(*e));
  if (e->home) {
    st.home = e->home;
    st.channels[{peer_home, 0}] =
      open_channel(caf::actor_cast<caf::actor>(e->home), e->dp, std::string{});
  }
  self->delayed_send(self, std::chrono::seconds(1), caf::tick_atom::value);
  // Control messages act only when they come from this process (the
  // device, the replica itself) or the deploying supervisor's; credits also
  // from the peers' processes. Anything else is logged and dropped: a
  // member of the cluster running another job cannot steer or read this
  // one (docs/security.md). Tensors are checked by job and generation.
  auto refused = [=](const char* what, bool from_peers_too) {
    const auto& sender = self->current_sender();
    if (!e->supervisor_node)
      return false;
    if (sender
        && (sender->node() == self->node() || sender->node() == e->supervisor_node
            || (from_peers_too && self->state.peer_nodes.count(sender->node()))))
      return false;
    spdlog::warn("{}: refused {} from {}: not this job's supervisor, node or "
                 "peers",
                 name_of(*e), what,
                 sender ? "process " + to_string(sender->node())
                        : std::string("an anonymous sender"));
    return true;
  };
  // Activations, gradients, all-reduce chunks, inputs and labels: one
  // identity (tensor_message), checked here once, then kept by step and
  // micro-batch until the stream takes them.
  auto receive = [=](serialization::tensor_message& m) {
    using serialization::tensor_kind;
    auto& s = self->state;
    const auto what = serialization::to_string(m.kind);
    if (m.job != e->spec.job) {
      spdlog::error("{}: dropped {} of another job", name_of(*e), what);
      return;
    }
    // Tensors of another deployment: a replaced peer's last sends.
    if (m.generation != e->spec.generation)
      return;
    if (m.step < (s.running ? s.step : s.step + 1)) {
      spdlog::error("{}: dropped {} for step {} (at step {})", name_of(*e),
                    what, m.step, s.step);
      return;
    }
    const bool piece = m.kind == tensor_kind::activation
                       || m.kind == tensor_kind::gradient;
    const bool own_rows = m.kind == tensor_kind::input
                          || m.kind == tensor_kind::label;
    if (!piece && !own_rows && m.kind != tensor_kind::all_reduce) {
      spdlog::error("{}: dropped a tensor of kind {}", name_of(*e), what);
      return;
    }
    if ((piece || own_rows)
        && (m.micro_batch < 0 || m.micro_batch >= e->spec.micro_batches)) {
      spdlog::error("{}: dropped {} for micro-batch {}", name_of(*e), what,
                    m.micro_batch);
      return;
    }
    if (piece
        && !check_index(self, m.sender,
                        m.kind == tensor_kind::activation ? e->prev.size()
                                                          : e->next.size(),
                        what.c_str()))
      return;
    // Activations, gradients and all-reduce chunks cross links as the job
    // compresses them (activations come from the stage before, gradients
    // from the next); inputs and labels as they are.
    const auto codec = m.kind == tensor_kind::activation
                         ? e->link_codec(true, false, m.sender)
                       : m.kind == tensor_kind::gradient
                         ? e->link_codec(false, true, m.sender)
                       : m.kind == tensor_kind::all_reduce ? e->all_reduce_codec
                                                           : kernels::wire_codec::none;
    kernels::encoded_tensor received;
    try {
      received = read_wire_payload(m.payload, codec);
    } catch (const std::exception& ex) {
      spdlog::error("{}: dropped malformed {}: {}", name_of(*e), what, ex.what());
      return;
    }
    const auto& shape = received.values;
    int64_t rows = -1; // the rows this kind must have (-1: any)
    if (piece)
      rows = [&] {
        auto ov = overlap(e->mine, (m.kind == tensor_kind::activation
                                      ? e->prev
                                      : e->next)[m.sender]);
        return ov.end - ov.begin;
      }();
    else if (own_rows)
      rows = e->mine.end - e->mine.begin;
    if (rows >= 0 && (shape.dim() < 1 || shape.size(0) != rows)) {
      spdlog::error("{}: dropped {} with {} rows from {} (expected {})",
                    name_of(*e), what, shape.dim() < 1 ? -1 : shape.size(0), m.sender,
                    rows);
      return;
    }
    torch::Tensor t;
    try {
      t = decode_on(received, codec, e->device);
    } catch (const std::exception& ex) {
      fail(self, "cannot move " + what + " to " + e->device.str() + ": " + ex.what());
      return;
    }
    switch (m.kind) {
      case tensor_kind::activation:
        s.acts[{m.step, m.micro_batch, m.sender}] = t;
        break;
      case tensor_kind::gradient:
        s.grads[{m.step, m.micro_batch, m.sender}] = t;
        break;
      case tensor_kind::input:
        s.inputs[{m.step, m.micro_batch}] = t;
        break;
      case tensor_kind::label:
        s.labels[{m.step, m.micro_batch}] = t;
        break;
      default: // all_reduce
        s.ar_in[{m.step, m.piece}] = t;
    }
    advance(self);
  };
  return {
    [=](peer_atom, int32_t role, int32_t index, caf::actor peer,
        const std::string& data_endpoint) {
      if (refused("a peer", false))
        return;
      auto& s = self->state;
      if (peer)
        s.peer_nodes.insert(peer.node());
      // The link's transport is chosen here, once (channel.hpp).
      auto link = [&] {
        s.channels[{role, index}] = open_channel(peer, e->dp, data_endpoint);
      };
      switch (role) {
        case peer_prev:
          if (check_index(self, index, s.prev.size(), "peer")) {
            s.prev[index] = caf::actor_cast<replica_actor>(peer);
            link();
          }
          break;
        case peer_next:
          if (check_index(self, index, s.next.size(), "peer")) {
            s.next[index] = caf::actor_cast<replica_actor>(peer);
            link();
          }
          break;
        case peer_ring_next:
          s.ring_next = caf::actor_cast<replica_actor>(peer);
          index = 0;
          link();
          break;
        case peer_supervisor:
          s.supervisor = caf::actor_cast<step_driver_actor>(peer);
          self->monitor(peer);
          break;
        case peer_backup:
          s.backup = caf::actor_cast<device_actor>(peer);
          index = 0;
          link();
          break;
        case peer_home:
          s.home = caf::actor_cast<device_actor>(peer);
          index = 0;
          link();
          break;
        default:
          spdlog::error("{}: unknown peer role {}", name_of(*e), role);
      }
    },
    [=](start_atom, int64_t step, const caf::actor& reports_to) {
      if (refused("a start", false))
        return;
      auto& s = self->state;
      if (reports_to)
        s.report_to[step] = caf::actor_cast<micro_batch_relay_actor>(reports_to);
      s.starts.insert(step);
      advance(self);
    },
    [=](tensor_atom, serialization::tensor_message& m) { receive(m); },
    [=](ack_atom, int64_t generation, int32_t kind, int32_t from) {
      if (refused("a credit", true))
        return;
      auto& s = self->state;
      if (generation != e->spec.generation)
        return; // for a send of the deployment before

      auto& v = kind == 0 ? s.unacked_next : s.unacked_prev;
      if (!check_index(self, from, v.size(), "ack") || v[from] <= 0) {
        spdlog::error("{}: unexpected ack", name_of(*e));
        return;
      }
      --v[from];
      advance(self);
    },
    [=](reconf_atom, const std::string& spec_json,
        int64_t version) -> caf::result<std::string, int64_t> {
      // Before the promise: making it takes the sender from the message.
      const bool outsider = refused("a re-configuration", false);
      auto rp = self->make_response_promise<std::string, int64_t>();
      if (outsider) {
        rp.deliver(name_of(*e) + ": refused a re-configuration from outside the job",
                   int64_t{-1});
        return rp;
      }
      auto& s = self->state;
      replica_spec next;
      // A step at or after `version` that this replica began moved its
      // buffers (BatchNorm statistics) with each forward pass, and the
      // replay runs those passes again.
      const bool buffers_moved = e->has_buffers && s.running && s.step >= version;
      try {
        next = replica_spec_from_json(nlohmann::json::parse(spec_json));
        auto problem = reconfigure_problem(e->spec, next);
        if (!problem.empty())
          throw std::invalid_argument("the new spec has " + problem);
        reconfigure(self, std::move(next));
      } catch (const std::exception& ex) {
        rp.deliver(name_of(*e) + ": cannot stay: " + ex.what(), int64_t{-1});
        return rp;
      }
      // Steps at or after `version` are replayed: a replica that applied one
      // of them (or moved its buffers in one) goes back to the snapshot its
      // own node keeps.
      if (s.last_finished < version && !buffers_moved) {
        rp.deliver(std::string{}, int64_t{-1});
        advance(self);
        return rp;
      }
      if (!s.home) {
        rp.deliver(name_of(*e) + ": cannot roll back to version "
                     + std::to_string(version) + ": no home device",
                   int64_t{-1});
        return rp;
      }
      s.restoring = true;
      auto key = range_key(e->spec.first_layer, e->spec.end_layer);
      self->request(s.home, std::chrono::milliseconds(e->spec.recv_timeout_ms),
                    fetch_atom::value, key, version)
        .then(
          [=](std::string& err, std::string& state) mutable {
            auto& s = self->state;
            s.restoring = false;
            if (err.empty())
              try {
                load_stage_state(e->model, e->spec.first_layer, e->spec.end_layer,
                                 e->optimizer.get(),
                                 serialization::decode_tensors(state));
              } catch (const std::exception& ex) {
                err = ex.what();
              }
            if (!err.empty()) {
              s.failed = true;
              rp.deliver(name_of(*e) + ": cannot roll back to version "
                           + std::to_string(version) + ": " + err,
                         int64_t{-1});
              return;
            }
            s.last_finished = version - 1;
            rp.deliver(std::string{}, version);
            advance(self);
          },
          [=](caf::error& err) mutable {
            self->state.restoring = false;
            self->state.failed = true;
            rp.deliver(name_of(*e) + ": cannot roll back to version "
                         + std::to_string(version) + ": "
                         + self->system().render(err),
                       int64_t{-1});
          });
      return rp;
    },
    [=](state_atom, int64_t offset) -> std::tuple<std::string, int64_t> {
      if (refused("a state read", false))
        return {std::string{}, int64_t{0}}; // nothing of the state
      auto& read = self->state.state_read;
      if (offset == 0)
        read = std::make_shared<const std::string>(
          serialization::encode_tensors(capture_stage_state(
            e->model, e->spec.first_layer, e->spec.end_layer, e->optimizer.get(),
            serialization::tensor_capture::share)));
      else if (!read)
        // No capture under way: a fresh one could hold other weights than
        // the pieces already read (a step ran since), so the reader is told
        // the total changed instead (read_in_pieces fails naming it).
        return {std::string{}, int64_t{-1}};
      const auto total = static_cast<int64_t>(read->size());
      auto [piece, last] = piece_at(*read, offset);
      if (last)
        read.reset(); // read to the end (or past it): the copy is not kept
      return {std::move(piece), total};
    },
    [=](slow_atom, int32_t permille) {
      if (refused("a slowdown", false))
        return;
      if (permille >= 1000)
        e->spec.slowdown = permille / 1000.0;
      else
        spdlog::error("{}: ignored slowdown {} permille", name_of(*e), permille);
    },
    [=](progress_atom, int64_t wait) {
      if (self->current_sender() == caf::actor_cast<caf::strong_actor_ptr>(self))
        detail::report_if_still_waiting(self, wait);
    },
    [=](caf::tick_atom) {
      auto& s = self->state;
      if (s.running && s.blocked && !s.failed) {
        auto waited = std::chrono::steady_clock::now() - s.blocked_since;
        if (waited > std::chrono::milliseconds(e->spec.recv_timeout_ms))
          fail(self, "step " + std::to_string(s.step) + ": waited "
                       + std::to_string(e->spec.recv_timeout_ms)
                       + " ms at "
                       + planner::to_string(e->spec.stream[s.pc]));
      }
      self->delayed_send(self, std::chrono::seconds(1), caf::tick_atom::value);
    },
    [=](stop_atom) {
      if (!refused("a stop", false))
        self->quit();
    },
  };
}

} // namespace

replica_actor spawn_replica(caf::actor_system& sys, const replica_spec& spec,
                            const std::string& state, device_actor home,
                            std::shared_ptr<data_plane> dp,
                            std::shared_ptr<const std::atomic<int64_t>> halt_below,
                            caf::node_id supervisor_node,
                            replica_footprint* footprint) {
  auto e = std::make_shared<detail::engine>();
  e->spec = spec;
  e->dp = dp;
  e->halt_below = std::move(halt_below);
  e->home = home;
  e->supervisor_node = std::move(supervisor_node);
  detail::apply_spec(*e);
  if (spec.first_layer < 0 || spec.first_layer >= spec.end_layer)
    throw std::invalid_argument("replica spec: layers ["
                                + std::to_string(spec.first_layer) + ", "
                                + std::to_string(spec.end_layer)
                                + ") are not a range of layers");
  // Only the stage's layers are constructed: a device that hosts the last
  // layers of a large model never allocates the others.
  e->model = training::build_model(spec.model, spec.model_options,
                                   {spec.first_layer, spec.end_layer});
  if (spec.end_layer > e->model->size())
    throw std::invalid_argument(
      "replica spec: layers [" + std::to_string(spec.first_layer) + ", "
      + std::to_string(spec.end_layer) + ") do not fit model '" + spec.model
      + "' of " + std::to_string(e->model->size()) + " layers");
  e->device = kernels::resolve_compute_device(spec.compute_device);
  auto predicted = predict_footprint(e->model, spec);
  // Once per node, as the planner reserves it (plannable_memory_bytes): the
  // first replica's prediction carries it, and the later ones count it in
  // what is already committed.
  predicted.library_workspace
    = spec.memory_committed > 0 ? 0 : kernels::library_workspace_bytes(e->device);
  check_budget(predicted, spec);
  if (footprint)
    *footprint = predicted;
  e->predicted_bytes = predicted.total();
  // Before the optimizer is made: it holds the parameters it was given.
  e->model->to(e->device);
  e->model->train();
  for (const auto& t : e->model->parameters())
    e->model_bytes += static_cast<int64_t>(t.nbytes());
  for (const auto& t : e->model->buffers())
    e->model_bytes += static_cast<int64_t>(t.nbytes());
  e->params = e->model->range_parameters(spec.first_layer, spec.end_layer);
  e->has_buffers = e->model->range_state(spec.first_layer, spec.end_layer).size()
                   > e->params.size();
  e->optimizer = training::make_optimizer(spec.optimizer, e->params);
  load_stage_state(e->model, spec.first_layer, spec.end_layer,
                   e->optimizer.get(), serialization::decode_tensors(state));
  auto r = sys.spawn<caf::detached>(replica_fun, e);
  if (dp)
    dp->add_sink(caf::actor_cast<caf::actor>(r),
                 static_cast<uint64_t>(predicted.largest_frame));
  return r;
}

std::string read_replica_state(caf::blocking_actor* self, const replica_actor& replica,
                               std::chrono::milliseconds timeout) {
  // A refused read answers nothing, which reads as an empty state.
  return read_in_pieces(
    [&](int64_t offset) {
      std::pair<std::string, int64_t> out;
      std::string err;
      self->request(replica, timeout, state_atom::value, offset)
        .receive([&](std::string& piece, int64_t total) { out = {std::move(piece), total}; },
                 [&](caf::error& e) { err = self->system().render(e); });
      if (!err.empty())
        throw std::runtime_error(err);
      return out;
    },
    "reading a replica's state");
}

} // namespace asteroid::actors
