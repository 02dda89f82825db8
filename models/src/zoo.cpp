#include "asteroid/models/zoo.hpp"

#include "asteroid/models/bert.hpp"
#include "asteroid/models/efficientnet.hpp"
#include "asteroid/models/mlp_cnn.hpp"
#include "asteroid/models/mobilenet_v2.hpp"
#include "asteroid/models/resnet.hpp"
#include "asteroid/models/vit.hpp"

#include <stdexcept>
#include <utility>

namespace asteroid::models {

namespace {

using builder = sequential_model (*)(const model_options&);

const std::vector<std::pair<std::string, builder>>& registry() {
  static const std::vector<std::pair<std::string, builder>> entries{
    {"mlp", &make_mlp},
    {"cnn", &make_cnn},
    {"cnn_bn", &make_cnn_bn},
    {"mobilenet_v2", &make_mobilenet_v2},
    {"resnet18", &make_resnet18},
    {"resnet50", &make_resnet50},
    {"efficientnet_b1", &make_efficientnet_b1},
    {"bert_small", &make_bert_small},
    {"bert_tiny", &make_bert_tiny},
    {"bert_base", &make_bert_base},
    {"vit", &make_vit},
    {"vit_tiny", &make_vit_tiny},
    {"vit_large", &make_vit_large},
  };
  return entries;
}

} // namespace

sequential_model make_model(const std::string& name,
                            const model_options& options) {
  for (const auto& [known, build] : registry()) {
    if (known == name) {
      if (options.seed() >= 0)
        torch::manual_seed(static_cast<uint64_t>(options.seed()));
      return build(options);
    }
  }
  std::string list;
  for (const auto& [known, build] : registry())
    list += (list.empty() ? "" : ", ") + known;
  throw std::invalid_argument("make_model: unknown model '" + name
                              + "'; known models: " + list);
}

std::vector<std::string> model_names() {
  std::vector<std::string> names;
  for (const auto& entry : registry())
    names.push_back(entry.first);
  return names;
}

} // namespace asteroid::models
