#pragma once
/// \file
/// Models by name, for every process of a job: the zoo (models::make_model)
/// and the models a program registers itself. A job names its model; each
/// device builds it from that name and its JSON options, so a program that
/// registers a model must do so in every process that hosts a replica of it.
///
/// A replica builds only the layers of its stage (`build_model` with a
/// range): the zoo and ranged factories never construct the other layers; a
/// factory that takes only the options builds the whole model, of which the
/// layers outside the range are then dropped (so its peak is the whole
/// model's, its steady state the stage's).
#include "asteroid/models/layer_range.hpp"
#include "asteroid/models/sequential_model.hpp"

#include <nlohmann/json.hpp>

#include <functional>
#include <string>

namespace asteroid::training {

/// Builds a model from the JSON options a job carries.
using model_factory =
  std::function<models::sequential_model(const nlohmann::json& options)>;

/// Builds the layers `layers` of a model from the JSON options a job
/// carries: a sequential_model constructed with that built range and layers
/// appended through `layer_factory`s (sequential_model.hpp), so that the
/// others are never constructed.
using ranged_model_factory = std::function<models::sequential_model(
  const nlohmann::json& options, const models::layer_range& layers)>;

/// Builds the model `name`, constructing only the layers in `layers` (the
/// others keep their names and shapes): a registered factory, else the zoo's
/// model of that name with `options` read by `model_options_from_json`.
/// Throws std::invalid_argument naming an unknown model or a bad option.
models::sequential_model build_model(const std::string& name,
                                     const nlohmann::json& options,
                                     const models::layer_range& layers = {});

/// Registers (or replaces) the factory of `name`; thread-safe.
void register_model_factory(const std::string& name, model_factory factory);
void register_model_factory(const std::string& name,
                            ranged_model_factory factory);

} // namespace asteroid::training
