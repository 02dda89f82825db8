#pragma once

#include "asteroid/models/model_options.hpp"

#include <nlohmann/json.hpp>

namespace asteroid::training {

/// The model options as JSON, so a checkpoint or a job file can rebuild the
/// exact model.
nlohmann::json to_json(const models::model_options& options);

/// Reads options written by to_json (missing keys keep their defaults);
/// throws std::invalid_argument naming a key of the wrong type.
models::model_options model_options_from_json(const nlohmann::json& j);

} // namespace asteroid::training
