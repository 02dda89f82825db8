#pragma once
/// \file
/// What a supervisor reads from a node's capabilities (its `caps_atom`
/// answer, a JSON object: "memory_bytes", "library_workspace_bytes",
/// "compute_device", "device_name", ...) when it builds the planner's
/// cluster.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace asteroid::actors {

/// The memory a planner may give the stages on a node: its budget
/// ("memory_bytes", 4 GiB when absent) less what its GPU libraries keep
/// ("library_workspace_bytes"), which the node adds once to its replicas'
/// predicted footprint. A budget of 0 or less (none) is returned as it is;
/// the result is never below 0.
int64_t plannable_memory_bytes(const nlohmann::json& caps);

/// Whether the node computes on a GPU ("compute_device" cuda or cuda:N).
bool computes_on_gpu(const nlohmann::json& caps);

/// Whether a planner job with `speeds` ("auto", "reported", "measured")
/// times the model on every node of `caps`: "measured" always, "reported"
/// never, "auto" when the nodes name different compute devices (kind and
/// name: a GPU beside CPUs, two kinds of GPU). Throws std::invalid_argument
/// for another `speeds`.
bool speeds_to_measure(const std::string& speeds, const std::vector<nlohmann::json>& caps);

/// Whether `speeds` is one of a job's `speeds` values: auto, reported or
/// measured.
bool known_speeds(const std::string& speeds);

} // namespace asteroid::actors
