#include "replica_reconfigure.hpp"

#include "asteroid/actors/data_plane.hpp"
#include "asteroid/actors/protocol.hpp"
#include "asteroid/actors/replica_footprint.hpp"

#include <algorithm>

namespace asteroid::actors::detail {

void apply_spec(engine& e) {
  const auto& spec = e.spec;
  e.first = spec.stage == 0;
  e.last = spec.stage + 1 == spec.num_stages;
  e.loss = e.last ? training::find_loss(spec.loss) : training::loss_function{};
  e.mine = spans(spec.shares).at(static_cast<size_t>(spec.replica));
  e.prev = spans(spec.prev_shares);
  e.next = spans(spec.next_shares);
  e.activation_codec = kernels::parse_wire_codec(spec.activation_codec);
  e.gradient_codec = kernels::parse_wire_codec(spec.gradient_codec);
  e.all_reduce_codec = kernels::parse_wire_codec(spec.all_reduce_codec);
  e.plain_prev.assign(e.prev.size(), 0);
  for (int q : spec.plain_prev)
    e.plain_prev.at(static_cast<size_t>(q)) = 1;
  e.plain_next.assign(e.next.size(), 0);
  for (int q : spec.plain_next)
    e.plain_next.at(static_cast<size_t>(q)) = 1;
  if (!spec.error_feedback || e.gradient_codec == kernels::wire_codec::none)
    e.gradient_feedback.reset();
  else if (!e.gradient_feedback)
    e.gradient_feedback = std::make_unique<kernels::error_feedback>(e.gradient_codec);
}

std::string reconfigure_problem(const replica_spec& running,
                                const replica_spec& next) {
  if (next.model != running.model || next.model_options != running.model_options)
    return "another model";
  if (next.first_layer != running.first_layer || next.end_layer != running.end_layer)
    return "layers [" + std::to_string(next.first_layer) + ", "
           + std::to_string(next.end_layer) + ") instead of ["
           + std::to_string(running.first_layer) + ", "
           + std::to_string(running.end_layer) + ")";
  const auto& a = next.optimizer;
  const auto& b = running.optimizer;
  if (a.kind != b.kind || a.lr != b.lr || a.momentum != b.momentum
      || a.weight_decay != b.weight_decay)
    return "another optimizer";
  return {};
}

void reconfigure(replica_self* self, replica_spec next) {
  auto& st = self->state;
  auto& e = *st.e;
  next.slowdown = std::max(next.slowdown, e.spec.slowdown);
  // The node's word, not the supervisor's (the device's builder set them).
  next.memory_budget = e.spec.memory_budget;
  next.compute_device = e.spec.compute_device;
  e.spec = std::move(next);
  apply_spec(e);
  if (e.dp)
    // Other shares, other frames: the largest one it now expects.
    e.dp->add_sink(caf::actor_cast<caf::actor>(self),
                   static_cast<uint64_t>(predict_footprint(e.model, e.spec).largest_frame));
  st.prev.assign(e.prev.size(), replica_actor{});
  st.next.assign(e.next.size(), replica_actor{});
  st.ring_next = nullptr;
  st.backup = nullptr;
  // The home device is this node's and stays; every other peer is named
  // again by the new deployment.
  auto home = st.channels.find({peer_home, 0});
  auto home_channel = home == st.channels.end() ? nullptr : home->second;
  st.channels.clear();
  if (home_channel)
    st.channels[{peer_home, 0}] = home_channel;
  st.unacked_prev.assign(e.prev.size(), 0);
  st.unacked_next.assign(e.next.size(), 0);
  st.served.clear();
  st.step = -1;
  st.running = false;
  st.failed = false;
  st.blocked = false;
  st.pc = 0;
  st.starts.clear();
  st.report_to.clear();
  st.unreported.clear();
  st.inputs.clear();
  st.labels.clear();
  st.acts.clear();
  st.grads.clear();
  st.ar_in.clear();
  st.ar_k = -1;
  st.ar_flat = torch::Tensor();
  st.ar_buckets.clear();
  st.ar_grads.clear();
  st.drop_micro_batch_tensors();
  st.reset_report_metrics();
  // The backup may be another device now: the first step snapshots anew.
  st.snapshotted = -1;
}

} // namespace asteroid::actors::detail
