#pragma once
/// \file
/// Models by name, for every process of a job: the zoo (models::make_model)
/// and the models a program registers itself. A job names its model; each
/// device builds it from that name and its JSON options, so a program that
/// registers a model must do so in every process that hosts a replica of it.
#include "asteroid/models/sequential_model.hpp"

#include <nlohmann/json.hpp>

#include <functional>
#include <string>

namespace asteroid::training {

/// Builds a model from the JSON options a job carries.
using model_factory =
  std::function<models::sequential_model(const nlohmann::json& options)>;

/// Builds the model `name`: a registered factory, else the zoo's model of
/// that name with `options` read by `model_options_from_json`. Throws
/// std::invalid_argument naming an unknown model or a bad option.
models::sequential_model build_model(const std::string& name,
                                     const nlohmann::json& options);

/// Registers (or replaces) the factory of `name`; thread-safe.
void register_model_factory(const std::string& name, model_factory factory);

} // namespace asteroid::training
