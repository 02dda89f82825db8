#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "asteroid/planner/cluster.hpp"
#include "asteroid/planner/instruction.hpp"
#include "asteroid/planner/json_reader.hpp"
#include "asteroid/planner/model_profile.hpp"
#include "asteroid/planner/plan.hpp"

namespace asteroid::planner {

/// JSON I/O of the planner's shared types (nlohmann ADL hooks).
///
/// `from_json` throws `planner_error` whose message names the field
/// ("cluster: devices[2].memory: expected ..."); the `load_*_file` functions
/// put the file path in front. Formats are documented in docs/planner.md.
void to_json(nlohmann::json& j, const layer_profile& x);
void from_json(const nlohmann::json& j, layer_profile& x);
void to_json(nlohmann::json& j, const model_profile& x);
void from_json(const nlohmann::json& j, model_profile& x);
void to_json(nlohmann::json& j, const device_spec& x);
void from_json(const nlohmann::json& j, device_spec& x);
void to_json(nlohmann::json& j, const cluster& x);
void from_json(const nlohmann::json& j, cluster& x);
void to_json(nlohmann::json& j, const stage_plan& x);
void from_json(const nlohmann::json& j, stage_plan& x);
void to_json(nlohmann::json& j, const plan& x);
void from_json(const nlohmann::json& j, plan& x);
/// An instruction as `{"op": "SEND_ACT", "mb": 2, "peer": 1}`; "mb" and
/// "peer" are left out where they are -1.
void to_json(nlohmann::json& j, const instruction& x);
void from_json(const nlohmann::json& j, instruction& x);

/// Parses `j` with `where` (a file name or "cluster") leading every error.
model_profile parse_model_profile(const nlohmann::json& j, const std::string& where);
cluster parse_cluster(const nlohmann::json& j, const std::string& where);
plan parse_plan(const nlohmann::json& j, const std::string& where);
/// Parses one layer's profile, as a profile file holds it; errors name `f`
/// (a field of whatever document carries it: "replica spec: emulated_compute").
layer_profile parse_layer_profile(const nlohmann::json& j, const json_field& f);
/// Parses an array of instructions (an instruction stream shipped to a
/// replica); errors name `where` and the index ("stream[3].op: ...").
std::vector<instruction> parse_instructions(const nlohmann::json& j,
                                            const std::string& where);

model_profile load_model_profile_file(const std::string& path);
void save_model_profile_file(const model_profile& x, const std::string& path);
/// Loads a cluster file; speeds are relative to jetson-nano (see
/// device_catalog.hpp and `rebase_speeds`).
cluster load_cluster_file(const std::string& path);
void save_cluster_file(const cluster& x, const std::string& path);
/// Loads a plan; structure only: call `validate` against a model and cluster.
plan load_plan_file(const std::string& path);
void save_plan_file(const plan& x, const std::string& path);

/// Parses a memory size: a byte count or a string like "4GiB", "8GB",
/// "512 MiB", "1.5G" (K/M/G/T = powers of 1000 with B, of 1024 with iB or
/// alone as K/M/G/T are taken as binary). Throws `planner_error` naming
/// `where` on anything else.
int64_t parse_memory_size(const nlohmann::json& j, const std::string& where);

/// Formats bytes for humans: "3.00 GiB", "512.0 MiB", "12 B".
std::string format_bytes(int64_t bytes);

} // namespace asteroid::planner
