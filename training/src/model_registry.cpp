#include "asteroid/training/model_registry.hpp"

#include "asteroid/models/zoo.hpp"
#include "asteroid/training/model_options_json.hpp"

#include <map>
#include <mutex>

namespace asteroid::training {

namespace {

struct registry {
  std::mutex mutex;
  std::map<std::string, model_factory> factories;
};

registry& the_registry() {
  static registry r;
  return r;
}

} // namespace

void register_model_factory(const std::string& name, model_factory factory) {
  auto& r = the_registry();
  std::lock_guard<std::mutex> guard{r.mutex};
  r.factories[name] = std::move(factory);
}

models::sequential_model build_model(const std::string& name,
                                     const nlohmann::json& options) {
  model_factory factory;
  {
    auto& r = the_registry();
    std::lock_guard<std::mutex> guard{r.mutex};
    auto i = r.factories.find(name);
    if (i != r.factories.end())
      factory = i->second;
  }
  // Built outside the lock: a factory may take long, or build another model.
  if (factory)
    return factory(options);
  return models::make_model(name, model_options_from_json(options));
}

} // namespace asteroid::training
