#include "stage_executor.hpp"

#include "asteroid/actors/micro_batch_progress.hpp"
#include "asteroid/actors/protocol.hpp"
#include "asteroid/actors/stage_state.hpp"
#include "asteroid/actors/state_uploads.hpp"
#include "asteroid/kernels/compute_device.hpp"
#include "asteroid/serialization/tensor_wire.hpp"
#include "device_clock.hpp"
#include "process_memory.hpp"
#include "replica_links.hpp"
#include "ring_all_reduce.hpp"

#include <array>
#include <stdexcept>

namespace asteroid::actors::detail {

namespace {

using planner::instruction;
using planner::op;

/// What a handler tells the executor.
enum class outcome {
  next, ///< the instruction is done: go on with the next one
  wait, ///< it needs a message that has not arrived: resume here later
};

using handler = outcome (*)(replica_self*, const instruction&);

/// Notes for micro-batch `mb`'s actor that this replica finished `pass` of
/// its rows (nothing when the step came without micro-batch actors);
/// flush_progress sends the notes.
void tell_micro_batch(replica_self* self, int mb, micro_batch_pass pass) {
  auto& st = self->state;
  if (mb < 0 || mb >= st.e->spec.micro_batches
      || st.report_to.count(st.step) == 0)
    return;
  st.unreported.push_back(2 * mb + pass);
}

/// Sends the passes noted since the last report in one message: from the
/// nodes' processes to the supervisor's, one message per pass cost more of
/// the 4-device job's compute than every other control message
/// (docs/runtime.md, "Micro-batch actors").
void flush_progress(replica_self* self) {
  auto& st = self->state;
  if (st.unreported.empty())
    return;
  auto it = st.report_to.find(st.step);
  if (it != st.report_to.end()) {
    st.progress_sent += static_cast<int64_t>(st.unreported.size());
    ++st.progress_messages;
    self->send(it->second, progress_atom::value,
               static_cast<int64_t>(st.e->spec.generation), st.step,
               static_cast<int32_t>(st.e->spec.stage),
               static_cast<int32_t>(st.e->spec.replica), st.unreported);
  }
  st.unreported.clear();
}

/// The stream waits for a message: the passes not yet reported go now, or,
/// with the spec's `report_after_ms` (job_spec::micro_batch_report_ms), if
/// the wait lasts that long (up to twice as long when the reminder of an
/// earlier wait is still on its way: one at a time, since each is a timer
/// of CAF's clock, and one per wait woke that thread as often as the
/// reports they saved woke the network's).
void report_on_wait(replica_self* self) {
  auto& st = self->state;
  if (st.e->spec.report_after_ms <= 0)
    return flush_progress(self);
  if (st.reminder_pending || st.unreported.empty())
    return;
  st.reminder_pending = true;
  self->delayed_send(self, std::chrono::milliseconds(st.e->spec.report_after_ms),
                     progress_atom::value, st.waits);
}

outcome load_micro_batch(replica_self* self, const instruction& ins) {
  auto& st = self->state;
  auto& e = *st.e;
  const auto key = std::make_pair(st.step, ins.micro_batch);
  auto x = st.inputs.find(key);
  auto y = st.labels.find(key);
  if ((e.first && x == st.inputs.end()) || (e.last && y == st.labels.end()))
    return outcome::wait;
  if (e.first) {
    st.x[ins.micro_batch] = x->second;
    st.inputs.erase(x);
  }
  if (e.last) {
    st.y[ins.micro_batch] = y->second;
    st.labels.erase(y);
  }
  return outcome::next;
}

outcome recv_activation(replica_self* self, const instruction& ins) {
  auto& st = self->state;
  if (st.e->mine.empty())
    return outcome::next;
  auto t = take_pieces(self, true, ins.micro_batch);
  if (!t.defined())
    return outcome::wait;
  st.in[ins.micro_batch] = t.detach().requires_grad_(true);
  return outcome::next;
}

outcome forward(replica_self* self, const instruction& ins) {
  auto& st = self->state;
  auto& e = *st.e;
  if (e.mine.empty())
    return outcome::next;
  auto mb = ins.micro_batch;
  auto input = e.first ? st.x[mb] : st.in[mb];
  const auto& profiled = e.spec.emulated_compute;
  compute(
    self, "FWD mb=" + std::to_string(mb),
    [&] { st.out[mb] = e.model->forward_range(input, e.spec.first_layer, e.spec.end_layer); },
    profiled ? profiled->forward_time(static_cast<double>(input.size(0))) : -1.0);
  tell_micro_batch(self, mb, pass_forward);
  return outcome::next;
}

outcome send_activation(replica_self* self, const instruction& ins) {
  auto& st = self->state;
  if (st.e->mine.empty())
    return outcome::next;
  return send_pieces(self, true, ins.peer_stage, ins.micro_batch,
                     st.out[ins.micro_batch].detach())
           ? outcome::next
           : outcome::wait;
}

outcome recv_grad(replica_self* self, const instruction& ins) {
  auto& st = self->state;
  if (st.e->mine.empty())
    return outcome::next;
  auto mb = ins.micro_batch;
  auto t = take_pieces(self, false, mb);
  if (!t.defined())
    return outcome::wait;
  if (t.sizes() != st.out[mb].sizes())
    throw std::runtime_error("gradient of micro-batch " + std::to_string(mb)
                             + " has the wrong shape");
  st.grad_out[mb] = t;
  return outcome::next;
}

outcome backward(replica_self* self, const instruction& ins) {
  auto& st = self->state;
  auto& e = *st.e;
  if (e.mine.empty())
    return outcome::next;
  auto mb = ins.micro_batch;
  const auto& profiled = e.spec.emulated_compute;
  const double profiled_s
    = profiled ? profiled->backward_time(static_cast<double>(st.out[mb].size(0))) : -1.0;
  compute(self, "BWD mb=" + std::to_string(mb), [&] {
    if (e.last) {
      // The loss sums over my rows; divided by the mini-batch size, the sum
      // over replicas and micro-batches is the mini-batch mean, so the
      // gradients just add up.
      auto sum = e.loss(st.out[mb], st.y[mb]);
      if (sum.dim() != 0)
        throw std::runtime_error("loss '" + e.spec.loss
                                 + "' returned a tensor of "
                                 + std::to_string(sum.dim())
                                 + " dimensions, not a scalar (the sum over "
                                   "the rows)");
      auto loss = sum / static_cast<double>(e.spec.batch_size);
      st.loss += loss.item<double>();
      loss.backward();
    } else {
      st.out[mb].backward(st.grad_out[mb]);
    }
  }, profiled_s);
  st.out[mb] = torch::Tensor();
  st.grad_out[mb] = torch::Tensor();
  tell_micro_batch(self, mb, pass_backward);
  return outcome::next;
}

outcome send_grad(replica_self* self, const instruction& ins) {
  auto& st = self->state;
  if (st.e->mine.empty())
    return outcome::next;
  auto mb = ins.micro_batch;
  auto g = st.in[mb].grad();
  if (!g.defined())
    g = torch::zeros_like(st.in[mb]);
  if (!send_pieces(self, false, ins.peer_stage, mb, g))
    return outcome::wait;
  st.in[mb] = torch::Tensor();
  return outcome::next;
}

outcome ring_all_reduce(replica_self* self, const instruction&) {
  return all_reduce(self) ? outcome::next : outcome::wait;
}

outcome optimizer_step(replica_self* self, const instruction&) {
  auto& e = *self->state.e;
  compute(self, "STEP", [&] { e.optimizer->step(); });
  return outcome::next;
}

/// The handler of every op, indexed by op.
const std::array<handler, planner::num_ops>& handlers() {
  static const auto table = [] {
    std::array<handler, planner::num_ops> t{};
    auto set = [&](op kind, handler h) { t[static_cast<size_t>(kind)] = h; };
    set(op::load_micro_batch, &load_micro_batch);
    set(op::forward, &forward);
    set(op::send_activation, &send_activation);
    set(op::recv_activation, &recv_activation);
    set(op::backward, &backward);
    set(op::send_grad, &send_grad);
    set(op::recv_grad, &recv_grad);
    set(op::all_reduce, &ring_all_reduce);
    set(op::optimizer_step, &optimizer_step);
    for (auto h : t)
      if (!h)
        throw std::logic_error("stage executor: an op has no handler");
    return t;
  }();
  return table;
}

namespace {

/// Whether the backup's copy of a snapshot of `bytes` goes layer by layer:
/// over CAF (no data plane to the backup node), a large one of a stage of
/// several layers. Why: CAF sends one message on a connection before the
/// next, and a node counts a connection silent until a whole message
/// arrives on it; a stage's state with momentum as one message (ResNet-50's
/// layers 9-18: about 165 MB, 13 s at 100 Mbit/s) held everything behind it
/// for as long, and on the testbed such a job stalled at step 1 until its
/// step timeout. Each layer is a snapshot of its own range, which the backup
/// node's store tiles back together (snapshot_store::parts, merged off the
/// device actor: snapshot_store::merge).
bool backup_by_layer(const replica_state& st, const engine& e, size_t bytes) {
  auto ch = st.channels.find({peer_backup, 0});
  return ch != st.channels.end() && std::string(ch->second->transport()) == "caf"
         && static_cast<int64_t>(bytes) > state_piece_bytes
         && e.spec.end_layer - e.spec.first_layer > 1;
}

} // namespace

/// Sends the state before step `version` to the home device and, from
/// replica 0, to the backup device. Group members hold identical weights, so
/// one copy outside the group suffices. The sends are asynchronous: the
/// pipeline only pays for the copy and the encoding.
void snapshot(replica_self* self, int64_t version) {
  auto& st = self->state;
  auto& e = *st.e;
  st.snapshotted = version;
  serialization::named_tensors state;
  std::string bytes;
  compute(self, "SNAPSHOT", [&] {
    // Encoded here, before the next step writes to the tensors: no copy.
    state = capture_stage_state(e.model, e.spec.first_layer, e.spec.end_layer,
                                e.optimizer.get(), serialization::tensor_capture::share);
    bytes = serialization::encode_tensors(state);
  });
  auto m = outgoing(self, serialization::tensor_kind::snapshot);
  m.step = version;
  m.key = range_key(e.spec.first_layer, e.spec.end_layer);
  m.payload = std::move(bytes);
  if (e.spec.replica == 0 && st.backup) {
    if (backup_by_layer(st, e, m.payload.size())) {
      for (int l = e.spec.first_layer; l < e.spec.end_layer; ++l) {
        auto part = outgoing(self, serialization::tensor_kind::snapshot);
        part.step = version;
        part.key = range_key(l, l + 1);
        compute(self, "SNAPSHOT", [&] {
          part.payload = serialization::encode_tensors(
            select_stage_state(e.model, l, l + 1, state));
        });
        transmit(self, peer_backup, 0, std::move(part));
      }
    } else {
      transmit(self, peer_backup, 0, m);
    }
  }
  if (st.home)
    transmit(self, peer_home, 0, std::move(m));
}

void begin_step(replica_self* self) {
  auto& st = self->state;
  auto& e = *st.e;
  const auto M = e.spec.micro_batches;
  st.step = *st.starts.begin();
  st.running = true;
  st.pc = 0;
  st.ar_k = -1;
  st.loss = 0;
  st.bytes.clear();
  st.max_unacked = 0;
  st.step_start_us = wall_us();
  st.x.assign(M, {});
  st.y.assign(M, {});
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

namespace {

/// Which transport each of this replica's links took ("next0": "tcp").
nlohmann::json transports(const replica_state& st) {
  nlohmann::json out = nlohmann::json::object();
  for (auto& [who, ch] : st.channels) {
    auto [role, index] = who;
    std::string name = role == peer_prev   ? "prev" + std::to_string(index)
                       : role == peer_next ? "next" + std::to_string(index)
                       : role == peer_ring_next ? "ring"
                       : role == peer_backup    ? "backup"
                       : role == peer_home      ? "home"
                                                : "role" + std::to_string(role);
    out[name] = ch->transport();
  }
  return out;
}

} // namespace

void finish_step(replica_self* self) {
  auto& st = self->state;
  auto& e = *st.e;
  flush_progress(self);
  // A replica on a GPU holds the job's tensors in device memory: its
  // allocator's peak is what the node's budget is for there.
  const auto gpu = kernels::device_memory_stats(e.device);
  const bool on_gpu = gpu.allocated_peak >= 0;
  nlohmann::json report{{"stage", e.spec.stage},
                        {"actor", static_cast<int64_t>(self->id())},
                        {"replica", e.spec.replica},
                        {"generation", e.spec.generation},
                        {"label", name_of(e)},
                        {"busy_s", st.busy_s},
                        {"overrun_s", st.overrun_s},
                        {"wall_s", (wall_us() - st.step_start_us) * 1e-6},
                        {"start_us", st.step_start_us},
                        {"loss", st.loss},
                        {"max_unacked", st.max_unacked},
                        {"model_bytes", e.model_bytes},
                        {"predicted_bytes", e.predicted_bytes},
                        {"peak_rss_bytes", resident_peak_bytes()},
                        {"job_peak_bytes", on_gpu ? gpu.allocated_peak : job_peak_bytes()},
                        {"host_job_peak_bytes", job_peak_bytes()},
                        {"tensor_peak_bytes",
                         on_gpu ? gpu.allocated_peak : tensor_job_peak_bytes()},
                        {"device_reserved_peak_bytes", gpu.reserved_peak},
                        {"library_workspace_bytes", kernels::library_workspace_bytes(e.device)},
                        {"compute_device", e.spec.compute_device},
                        {"memory_budget_bytes", e.spec.memory_budget},
                        {"micro_batch_reports", st.progress_sent},
                        {"micro_batch_messages", st.progress_messages},
                        {"bytes", st.bytes},
                        {"channels", transports(st)},
                        {"events", std::move(st.events)}};
  self->send(st.supervisor, done_atom::value, st.step, report.dump());
  st.last_finished = st.step;
  st.reset_report_metrics();
  st.starts.erase(st.step);
  st.report_to.erase(st.step);
  st.running = false;
  st.pc = 0;
  st.drop_micro_batch_tensors();
  // The state now is the state before the next step. Without run-ahead it is
  // taken while the report travels to the supervisor and the next start
  // comes back; with the next start already here (run-ahead) the next step
  // begins after it, which still beats waiting for that round trip.
  auto next = st.step + 1;
  if (e.spec.snapshot_every > 0 && next % e.spec.snapshot_every == 0)
    snapshot(self, next);
}

} // namespace

void advance(replica_self* self) {
  auto& st = self->state;
  if (st.failed || st.restoring || superseded(*st.e))
    return;
  try {
    if (!st.running) {
      if (st.starts.empty() || !st.supervisor)
        return;
      begin_step(self);
    }
    const auto& stream = st.e->spec.stream;
    const auto& table = handlers();
    while (st.pc < stream.size()) {
      if (superseded(*st.e))
        return; // the reconfiguration or the stop is in the mailbox
      const auto& ins = stream[st.pc];
      if (table[static_cast<size_t>(ins.kind)](self, ins) == outcome::wait) {
        if (!st.blocked) {
          st.blocked = true;
          st.blocked_since = std::chrono::steady_clock::now();
          ++st.waits;
          report_on_wait(self);
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

void report_if_still_waiting(replica_self* self, int64_t wait) {
  auto& st = self->state;
  st.reminder_pending = false;
  if (!st.running || !st.blocked)
    return;
  if (st.waits == wait)
    flush_progress(self);
  else
    report_on_wait(self); // a later wait: its own time from now
}

} // namespace asteroid::actors::detail
