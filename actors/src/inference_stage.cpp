// An inference stage: receive into a bounded queue, compute one request at a
// time without gradients, send the output on (inference_stage.hpp).
#include "asteroid/actors/inference_stage.hpp"

#include "asteroid/actors/channel.hpp"
#include "asteroid/actors/data_plane.hpp"
#include "asteroid/actors/stage_state.hpp"
#include "asteroid/actors/wire_compression.hpp"
#include "asteroid/kernels/compute_device.hpp"
#include "asteroid/kernels/wire_codec.hpp"
#include "asteroid/planner/json_io.hpp"
#include "asteroid/serialization/tensor_wire.hpp"
#include "asteroid/training/model_registry.hpp"
#include "emulated_time.hpp"
#include "unexpected.hpp"

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <deque>
#include <stdexcept>

namespace asteroid::actors {

namespace {

/// Trace events are kept for this many requests, so a long-running server's
/// stats stay small.
constexpr int64_t traced_requests = 256;

struct inference_engine {
  inference_spec spec;
  models::sequential_model model{nullptr};
  kernels::wire_codec codec = kernels::wire_codec::none;
  kernels::wire_codec input_codec = kernels::wire_codec::none;
  std::shared_ptr<data_plane> dp;
  caf::node_id server_node;
  /// Where the stage's layers and each request's tensors live.
  torch::Device device{torch::kCPU};
  /// One request's input, per sample: its shape and dtype.
  models::shape_t sample_shape;
  torch::Dtype input_dtype = torch::kFloat32;
};

struct inference_stage_state {
  std::shared_ptr<inference_engine> e;
  std::deque<serialization::tensor_message> queue;
  /// A compute_atom is in the mailbox: the next one is not sent again.
  bool cued = false;
  channel_ptr out;
  bool out_is_server = false;
  /// Who wired the stage (its server): the stage quits when it goes down.
  caf::actor_addr server;
  int64_t requests = 0;
  int64_t computes = 0; ///< requests answered or dropped at compute
  int64_t refused = 0;
  double busy_s = 0;
  double host_s = 0;
  int64_t queue_sum = 0;
  int64_t queue_max = 0;
  nlohmann::json events = nlohmann::json::array();
};

using inference_stage_self = inference_stage_actor::stateful_pointer<inference_stage_state>;

std::string label_of(const inference_engine& e) {
  return e.spec.label.empty() ? "inference stage " + std::to_string(e.spec.stage)
                              : e.spec.label;
}

int64_t element_count(const models::shape_t& shape) {
  int64_t n = 1;
  for (auto d : shape)
    n *= d;
  return n;
}

/// Why an input of these sizes and (decoded) dtype cannot be this stage's
/// input for one request ("" if it can).
std::string check_input(const inference_engine& e, c10::IntArrayRef sizes, torch::Dtype dtype) {
  const auto& shape = e.sample_shape;
  const auto dims = static_cast<int64_t>(sizes.size());
  bool ok = dims == static_cast<int64_t>(shape.size()) + 1 && sizes[0] >= 1
            && sizes[0] <= e.spec.micro_batch;
  for (size_t i = 0; ok && i < shape.size(); ++i)
    ok = sizes[i + 1] == shape[i];
  if (!ok) {
    std::string want = "[1.." + std::to_string(e.spec.micro_batch);
    for (auto d : shape)
      want += ", " + std::to_string(d);
    return "an input of shape " + c10::str(sizes) + " (expected " + want + "])";
  }
  if (dtype != e.input_dtype)
    return std::string("an input of dtype ") + c10::toString(dtype)
           + " (expected " + c10::toString(e.input_dtype) + ")";
  return {};
}

void cue(inference_stage_self self) {
  auto& st = self->state;
  if (!st.cued && !st.queue.empty() && st.out) {
    st.cued = true;
    self->send(self, compute_atom::value);
  }
}

void compute_next(inference_stage_self self) {
  auto& st = self->state;
  st.cued = false;
  if (st.queue.empty() || !st.out)
    return;
  auto& e = *st.e;
  const auto depth = static_cast<int64_t>(st.queue.size());
  ++st.computes;
  st.queue_sum += depth;
  st.queue_max = std::max(st.queue_max, depth);
  auto m = std::move(st.queue.front());
  st.queue.pop_front();
  serialization::tensor_message out;
  out.kind = serialization::tensor_kind::activation;
  out.job = e.spec.job;
  out.generation = e.spec.generation;
  out.step = m.step;
  out.sender = e.spec.stage;
  const double start_us = detail::wall_us();
  std::string why;
  auto t = detail::run_emulated(e.spec.slowdown, [&] {
    try {
      // Requests come as they are; activations under the link's codec,
      // which cross to the compute device encoded and decode there.
      const auto codec = m.kind == serialization::tensor_kind::input ? kernels::wire_codec::none
                                                                     : e.input_codec;
      auto received = read_wire_payload(m.payload, codec);
      why = check_input(e, received.values.sizes(),
                        codec == kernels::wire_codec::none ? received.values.scalar_type()
                                                           : torch::kFloat32);
      if (!why.empty())
        return;
      torch::NoGradGuard no_grad;
      auto x = decode_on(received, codec, e.device);
      auto y = e.model->forward_range(x, e.spec.first_layer, e.spec.end_layer);
      // The server gets the output as computed; the next stage under the
      // codec of the link to it. Encoding copies it to the host, so on a
      // GPU its kernels finish within this compute's time.
      out.payload = st.out_is_server ? serialization::encode_tensor(y)
                                     : encode_wire_payload(y, e.codec);
    } catch (const std::exception& ex) {
      why = ex.what();
    }
  });
  if (!why.empty()) {
    // The server's request timeout names the request that never came back.
    ++st.refused;
    spdlog::error("{}: dropped request {}: {}", label_of(e), m.step, why);
  } else {
    ++st.requests;
    st.busy_s += t.device_s;
    st.host_s += t.host_s;
    if (st.requests <= traced_requests)
      st.events.push_back({{"name", "request " + std::to_string(m.step)},
                           {"ts", start_us},
                           {"dur", std::max(t.host_s, t.device_s) * 1e6},
                           {"queue", depth}});
    auto err = st.out->send(self, std::move(out));
    if (!err.empty())
      spdlog::error("{}: request {} not sent on: {}", label_of(e), m.step, err);
  }
  cue(self);
}

inference_stage_actor::behavior_type
inference_stage_fun(inference_stage_self self, std::shared_ptr<inference_engine> e) {
  // This runs on the stage's own thread: apply the process's LibTorch
  // thread count here (as replicas do).
  at::init_num_threads();
  self->state.e = e;
  detail::drop_unexpected(self, label_of(*e));
  self->set_down_handler([=](caf::down_msg& dm) {
    if (dm.source == self->state.server) {
      spdlog::info("{}: its server went down, quitting", label_of(*e));
      self->quit();
    }
  });
  auto refused = [=](const char* what) {
    const auto& sender = self->current_sender();
    if (sender && (sender->node() == self->node() || sender->node() == e->server_node))
      return false;
    spdlog::warn("{}: refused {} from {}: not this job's server or node", label_of(*e),
                 what,
                 sender ? "process " + to_string(sender->node())
                        : std::string("an anonymous sender"));
    return true;
  };
  return {
    [=](peer_atom, int32_t role, int32_t, caf::actor& to,
        const std::string& endpoint) -> std::string {
      if (refused("a link"))
        return "refused: not this job's server";
      if (role != peer_next && role != peer_supervisor)
        return label_of(*e) + ": no link of role " + std::to_string(role);
      if (!to)
        return label_of(*e) + ": a link to no actor";
      auto& st = self->state;
      if (!st.server) {
        st.server = caf::actor_cast<caf::actor_addr>(self->current_sender());
        self->monitor(st.server);
      }
      st.out = open_channel(to, e->dp, endpoint);
      st.out_is_server = role == peer_supervisor;
      cue(self);
      return {};
    },
    [=](tensor_atom, serialization::tensor_message& m) {
      auto& st = self->state;
      using serialization::tensor_kind;
      const bool first = e->spec.stage == 0;
      if (m.job == e->spec.job && m.generation != e->spec.generation)
        return; // of a pipeline a recovery replaced
      if (m.job != e->spec.job || (first ? m.kind != tensor_kind::input
                                         : m.kind != tensor_kind::activation)) {
        ++st.refused;
        spdlog::error("{}: dropped {} of job {} (serves job {})", label_of(*e),
                      serialization::to_string(m.kind), m.job, e->spec.job);
        return;
      }
      if (static_cast<int64_t>(st.queue.size()) >= e->spec.queue_limit) {
        ++st.refused;
        spdlog::error("{}: dropped request {}: the receive queue holds its limit of {}",
                      label_of(*e), m.step, e->spec.queue_limit);
        return;
      }
      st.queue.push_back(std::move(m));
      cue(self);
    },
    [=](compute_atom) { compute_next(self); },
    [=](stats_atom) -> std::string {
      if (refused("a stats read"))
        return "{}";
      auto& st = self->state;
      return nlohmann::json{
        {"stage", e->spec.stage},
        {"label", label_of(*e)},
        {"layers", {e->spec.first_layer, e->spec.end_layer}},
        {"requests", st.requests},
        {"refused", st.refused},
        {"busy_s", st.busy_s},
        {"host_s", st.host_s},
        {"queue_mean", static_cast<double>(st.queue_sum)
                         / static_cast<double>(std::max<int64_t>(st.computes, 1))},
        {"queue_max", st.queue_max},
        {"sends_by", st.out ? st.out->transport() : "none"},
        {"input_codec", e->spec.input_codec},
        {"output_codec", st.out_is_server ? std::string("none") : e->spec.activation_codec},
        {"events", st.events}}
        .dump();
    },
    [=](slow_atom, int32_t permille) {
      if (refused("a slowdown"))
        return;
      if (permille >= 1000)
        e->spec.slowdown = permille / 1000.0;
    },
    [=](stop_atom) {
      if (!refused("a stop"))
        self->quit();
    },
  };
}

inference_footprint predict(const models::sequential_model& m, const inference_spec& s,
                            const models::shape_t& sample_shape, torch::Dtype dtype) {
  inference_footprint f;
  for (const auto& [name, t] : m->range_state(s.first_layer, s.end_layer))
    f.weights += static_cast<int64_t>(t.nbytes());
  const int64_t input = s.micro_batch * element_count(sample_shape)
                        * static_cast<int64_t>(c10::elementSize(dtype));
  int64_t outputs = 0;
  for (int l = s.first_layer; l < s.end_layer; ++l)
    outputs += s.micro_batch * element_count(m->output_shape(l)) * 4;
  f.queues = (s.queue_limit + 1) * input;
  f.working = outputs;
  f.largest_frame = input + input / 16 + (int64_t{64} << 10);
  return f;
}

} // namespace

inference_stage_actor spawn_inference_stage(caf::actor_system& sys,
                                            const inference_spec& spec,
                                            const std::string& weights,
                                            std::shared_ptr<data_plane> dp,
                                            caf::node_id server_node,
                                            int64_t committed,
                                            inference_footprint* footprint) {
  auto e = std::make_shared<inference_engine>();
  e->spec = spec;
  e->dp = dp;
  e->server_node = std::move(server_node);
  e->codec = kernels::parse_wire_codec(spec.activation_codec);
  e->input_codec = kernels::parse_wire_codec(spec.input_codec);
  // Only the stage's layers are constructed.
  e->model = training::build_model(spec.model, spec.model_options,
                                   {spec.first_layer, spec.end_layer});
  if (spec.end_layer > e->model->size())
    throw std::invalid_argument(
      "inference spec: layers [" + std::to_string(spec.first_layer) + ", "
      + std::to_string(spec.end_layer) + ") do not fit model '" + spec.model
      + "' of " + std::to_string(e->model->size()) + " layers");
  e->sample_shape = e->model->input_shape(spec.first_layer);
  e->input_dtype = spec.first_layer == 0 ? e->model->input_dtype() : torch::kFloat32;
  auto f = predict(e->model, spec, e->sample_shape, e->input_dtype);
  if (spec.memory_budget >= 0 && f.total() + committed > spec.memory_budget) {
    using planner::format_bytes;
    throw std::invalid_argument(
      "inference stage " + std::to_string(spec.stage) + " (layers ["
      + std::to_string(spec.first_layer) + ", " + std::to_string(spec.end_layer)
      + "), " + label_of(*e) + ") is predicted to need " + format_bytes(f.total())
      + " (weights " + format_bytes(f.weights) + ", queues " + format_bytes(f.queues)
      + ", working " + format_bytes(f.working) + ")"
      + (committed > 0 ? ", on top of " + format_bytes(committed)
                           + " for this node's other stages,"
                       : std::string())
      + " but the node's memory budget is " + format_bytes(spec.memory_budget));
  }
  if (footprint)
    *footprint = f;
  load_stage_state(e->model, spec.first_layer, spec.end_layer, nullptr,
                   serialization::decode_tensors(weights));
  e->device = kernels::resolve_compute_device(spec.compute_device);
  e->model->to(e->device);
  e->model->eval();
  auto a = sys.spawn<caf::detached>(inference_stage_fun, e);
  if (dp)
    dp->add_sink(caf::actor_cast<caf::actor>(a), static_cast<uint64_t>(f.largest_frame));
  return a;
}

} // namespace asteroid::actors
