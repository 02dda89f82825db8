#include "asteroid/actors/remote_probe.hpp"

#include "asteroid/planner/json_io.hpp"

#include <algorithm>
#include <stdexcept>

namespace asteroid::actors {

using nlohmann::json;

namespace {

std::string render(caf::actor_system& sys, const caf::error& e) {
  return e == caf::sec::request_timeout ? "no answer in time" : sys.render(e);
}

json caps_of(caf::actor_system& sys, const device_actor& device,
             std::chrono::milliseconds timeout) {
  caf::scoped_actor self{sys};
  std::string text, err;
  self->request(device, timeout, caps_atom::value)
    .receive([&](std::string& s) { text = std::move(s); },
             [&](caf::error& e) { err = render(sys, e); });
  if (!err.empty())
    throw std::runtime_error("node did not report capabilities: " + err);
  return json::parse(text);
}

} // namespace

planner::model_profile profile_on_node(caf::actor_system& sys,
                                       const device_actor& device,
                                       const std::string& model,
                                       const json& model_options,
                                       const training::profiler_options& opts,
                                       std::chrono::milliseconds timeout) {
  json request{{"model", model},
               {"model_options", model_options},
               {"batch_sizes", opts.batch_sizes},
               {"warmup", opts.warmup},
               {"repeats", opts.repeats},
               {"optimizer", training::to_string(opts.optimizer)},
               {"forward_only", opts.forward_only}};
  caf::scoped_actor self{sys};
  std::string err, text;
  self->request(device, timeout, profile_atom::value, request.dump())
    .receive(
      [&](std::string& e, std::string& t) {
        err = std::move(e);
        text = std::move(t);
      },
      [&](caf::error& e) { err = render(sys, e); });
  if (!err.empty())
    throw std::runtime_error("profiling '" + model + "' on the node: " + err);
  return planner::parse_model_profile(json::parse(text), "profile from node");
}

bool path_answers(caf::actor_system& sys, const device_actor& from,
                  const std::string& to_endpoint, std::string* why) {
  link_probe_options o;
  o.bytes = int64_t{16} << 10;
  o.stream = 1;
  o.timeout = std::chrono::milliseconds(500);
  o.path = probe_data_plane;
  try {
    measure_link(sys, from, to_endpoint, o);
    return true;
  } catch (const std::exception& e) {
    if (why)
      *why = e.what();
    return false;
  }
}

link_measurement measure_link(caf::actor_system& sys, const device_actor& from,
                              const std::string& to_endpoint,
                              const link_probe_options& opts) {
  caf::scoped_actor self{sys};
  std::string err;
  int64_t latency_ns = 0, bps = 0;
  // Up to four payload sizes, each a warm-up pair and `repeats` timed pairs;
  // or a stream, a warm-up and one tiny round trip.
  auto trips = opts.stream > 0 ? opts.stream + 3 : 8 * (opts.repeats + 1);
  self
    ->request(from, opts.timeout * trips, probe_atom::value, to_endpoint,
              opts.bytes, static_cast<int32_t>(opts.repeats),
              static_cast<int32_t>(opts.path), static_cast<int32_t>(opts.stream))
    .receive(
      [&](std::string& e, int64_t lat, int64_t bw) {
        err = std::move(e);
        latency_ns = lat;
        bps = bw;
      },
      [&](caf::error& e) { err = render(sys, e); });
  if (!err.empty())
    throw std::runtime_error("probing the link to " + to_endpoint + ": " + err);
  return {latency_ns * 1e-9, static_cast<double>(bps)};
}

planner::cluster measure_cluster(caf::actor_system& sys,
                                 const std::vector<device_actor>& devices,
                                 const std::vector<std::string>& endpoints,
                                 int reference, const link_probe_options& opts,
                                 std::vector<json>* capabilities) {
  if (devices.size() != endpoints.size())
    throw std::invalid_argument("measure_cluster: one endpoint per device");
  std::vector<json> caps;
  for (size_t d = 0; d < devices.size(); ++d) {
    try {
      caps.push_back(caps_of(sys, devices[d], opts.timeout));
    } catch (const std::exception& e) {
      throw std::runtime_error("node " + endpoints[d] + ": " + e.what());
    }
  }
  if (capabilities)
    *capabilities = caps;
  double ref_slowdown = caps.at(static_cast<size_t>(reference)).value("slowdown", 1.0);
  std::vector<planner::device_spec> specs;
  for (size_t d = 0; d < devices.size(); ++d)
    specs.push_back({caps[d].value("name", endpoints[d]), "measured",
                     ref_slowdown / caps[d].value("slowdown", 1.0),
                     plannable_memory_bytes(caps[d]), endpoints[d]});
  auto c = planner::cluster::uniform("measured", specs, 1e9);
  for (size_t d = 0; d < devices.size(); ++d)
    for (size_t e = 0; e < devices.size(); ++e) {
      if (d == e)
        continue;
      link_measurement m;
      try {
        m = measure_link(sys, devices[d], endpoints[e], opts);
      } catch (const std::exception& x) {
        throw std::runtime_error("node " + endpoints[d] + ": " + x.what());
      }
      c.bandwidth_Bps[d][e] = m.bandwidth_Bps;
      c.latency_s[d][e] = m.latency_s;
    }
  return c;
}

} // namespace asteroid::actors
