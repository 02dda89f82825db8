#include "asteroid/actors/stage_deployment.hpp"

#include "asteroid/planner/json_reader.hpp"

#include <stdexcept>

namespace asteroid::actors {

using nlohmann::json;
using planner::json_field;
using planner::read_optional;
using planner::read_required;

namespace {

json peer_json(const stage_peer& p) {
  return json{{"replica", p.replica}, {"device", p.device}, {"endpoint", p.endpoint}};
}

stage_peer read_peer(const json& j, const json_field& f) {
  planner::check_keys(j, f, {"replica", "device", "endpoint"});
  stage_peer p;
  read_required(j, f, "replica", p.replica);
  read_required(j, f, "device", p.device);
  read_required(j, f, "endpoint", p.endpoint);
  return p;
}

std::vector<stage_peer> read_peers(const json& j, const json_field& f,
                                   const char* key) {
  std::vector<stage_peer> out;
  const auto& list = planner::get_array(planner::member(j, f, key), f[key]);
  for (size_t i = 0; i < list.size(); ++i)
    out.push_back(read_peer(list[i], f[key][i]));
  return out;
}

/// Runs `read`, turning the toolkit's errors into std::invalid_argument
/// (they name `what` already).
template <class Read>
auto rethrowing(const char* what, Read read) {
  try {
    return read();
  } catch (const planner::json_error& e) {
    throw std::invalid_argument(e.what());
  } catch (const std::invalid_argument&) {
    throw;
  } catch (const std::exception& e) {
    throw std::invalid_argument(std::string(what) + ": " + e.what());
  }
}

} // namespace

json to_json(const stage_deployment& d) {
  json members = json::array();
  for (const auto& m : d.members)
    members.push_back({{"replica", m.replica},
                       {"device", m.device},
                       {"endpoint", m.endpoint},
                       {"spec", m.spec},
                       {"keep", m.keep},
                       {"restore_version", m.restore_version},
                       {"build_timeout_ms", m.build_timeout_ms}});
  return json{{"stage", d.stage},
              {"first_layer", d.first_layer},
              {"end_layer", d.end_layer},
              {"version", d.version},
              {"members", members}};
}

stage_deployment stage_deployment_from_json(const json& j) {
  return rethrowing("stage deployment", [&] {
    json_field f{"stage deployment", ""};
    planner::check_keys(j, f, {"stage", "first_layer", "end_layer", "version", "members"});
    stage_deployment d;
    read_required(j, f, "stage", d.stage);
    read_required(j, f, "first_layer", d.first_layer);
    read_required(j, f, "end_layer", d.end_layer);
    read_required(j, f, "version", d.version);
    if (d.first_layer < 0 || d.end_layer <= d.first_layer)
      f["end_layer"].fail("empty layer range");
    const auto& list = planner::get_array(planner::member(j, f, "members"), f["members"]);
    if (list.empty())
      f["members"].fail("a stage needs at least one member");
    for (size_t i = 0; i < list.size(); ++i) {
      auto mf = f["members"][i];
      const auto& mj = list[i];
      planner::check_keys(mj, mf, {"replica", "device", "endpoint", "spec", "keep",
                                   "restore_version", "build_timeout_ms"});
      stage_member m;
      read_required(mj, mf, "replica", m.replica);
      read_required(mj, mf, "device", m.device);
      read_required(mj, mf, "endpoint", m.endpoint);
      m.spec = planner::member(mj, mf, "spec");
      if (!m.spec.is_object())
        mf["spec"].fail(std::string("expected an object, got ") + m.spec.type_name());
      read_required(mj, mf, "keep", m.keep);
      read_required(mj, mf, "restore_version", m.restore_version);
      read_required(mj, mf, "build_timeout_ms", m.build_timeout_ms);
      if (m.replica != static_cast<int>(i))
        mf["replica"].fail("members must be listed in replica order");
      if (m.build_timeout_ms <= 0)
        mf["build_timeout_ms"].fail("must be positive");
      d.members.push_back(std::move(m));
    }
    return d;
  });
}

json to_json(const stage_wiring& w) {
  json prev = json::array(), next = json::array();
  for (const auto& p : w.prev)
    prev.push_back(peer_json(p));
  for (const auto& p : w.next)
    next.push_back(peer_json(p));
  return json{{"prev", prev}, {"next", next}, {"backup", peer_json(w.backup)}};
}

stage_wiring stage_wiring_from_json(const json& j) {
  return rethrowing("stage wiring", [&] {
    json_field f{"stage wiring", ""};
    planner::check_keys(j, f, {"prev", "next", "backup"});
    stage_wiring w;
    w.prev = read_peers(j, f, "prev");
    w.next = read_peers(j, f, "next");
    w.backup = read_peer(planner::member(j, f, "backup"), f["backup"]);
    return w;
  });
}

std::string link_route(int from, const std::string& from_endpoint,
                       const stage_peer& to) {
  // The data plane needs a listener at both ends; two replicas on one
  // device talk through their shared process's mailboxes.
  if (to.device == from || from_endpoint.empty())
    return {};
  return to.endpoint;
}

} // namespace asteroid::actors
