#include "asteroid/training/model_registry.hpp"

#include "asteroid/models/zoo.hpp"
#include "asteroid/training/model_options_json.hpp"

#include <map>
#include <mutex>

namespace asteroid::training {

namespace {

struct factory_registry {
  std::mutex mutex;
  std::map<std::string, ranged_model_factory> factories;
};

factory_registry& the_factory_registry() {
  static factory_registry r;
  return r;
}

/// Keeps layers `layers` of `whole` and drops the modules of the others,
/// for a factory that cannot build a range by itself.
models::sequential_model keep_only(const models::sequential_model& whole,
                                   const models::layer_range& layers) {
  if (layers.whole())
    return whole;
  models::sequential_model kept(whole->input_shape(), whole->input_dtype(), layers);
  for (int i = 0; i < static_cast<int>(whole->size()); ++i) {
    const auto& l = whole->at(i);
    if (layers.contains(i))
      kept->push_back(l.name, l.module, l.output_shape);
    else
      kept->push_back(l.name, models::layer_factory{}, l.output_shape);
  }
  kept->train(whole->is_training());
  return kept;
}

} // namespace

void register_model_factory(const std::string& name, model_factory factory) {
  register_model_factory(
    name, ranged_model_factory{[factory = std::move(factory)](
                                 const nlohmann::json& options,
                                 const models::layer_range& layers) {
      return keep_only(factory(options), layers);
    }});
}

void register_model_factory(const std::string& name,
                            ranged_model_factory factory) {
  auto& r = the_factory_registry();
  std::lock_guard<std::mutex> guard{r.mutex};
  r.factories[name] = std::move(factory);
}

models::sequential_model build_model(const std::string& name,
                                     const nlohmann::json& options,
                                     const models::layer_range& layers) {
  ranged_model_factory factory;
  {
    auto& r = the_factory_registry();
    std::lock_guard<std::mutex> guard{r.mutex};
    auto i = r.factories.find(name);
    if (i != r.factories.end())
      factory = i->second;
  }
  // Built outside the lock: a factory may take long, or build another model.
  if (factory)
    return factory(options, layers);
  return models::make_model(name, model_options_from_json(options).build_layers(layers));
}

} // namespace asteroid::training
