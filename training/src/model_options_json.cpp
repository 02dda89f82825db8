#include "asteroid/training/model_options_json.hpp"

#include <algorithm>
#include <iterator>
#include <stdexcept>

namespace asteroid::training {

namespace {

const char* stem_name(models::stem_kind k) {
  switch (k) {
    case models::stem_kind::imagenet:
      return "imagenet";
    case models::stem_kind::cifar:
      return "cifar";
    default:
      return "auto";
  }
}

models::stem_kind parse_stem(const std::string& s) {
  if (s == "imagenet")
    return models::stem_kind::imagenet;
  if (s == "cifar")
    return models::stem_kind::cifar;
  if (s == "auto")
    return models::stem_kind::automatic;
  throw std::invalid_argument("model option 'stem': unknown value '" + s
                              + "' (known: auto, imagenet, cifar)");
}

template <class T>
void read(const nlohmann::json& j, const char* key, T& out) {
  if (!j.contains(key))
    return;
  try {
    out = j.at(key).get<T>();
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(std::string{"model option '"} + key
                                + "': " + e.what());
  }
}

} // namespace

nlohmann::json to_json(const models::model_options& o) {
  return {{"num_classes", o.num_classes()},
          {"in_channels", o.in_channels()},
          {"image_size", o.image_size()},
          {"width_mult", o.width_mult()},
          {"seq_len", o.seq_len()},
          {"vocab_size", o.vocab_size()},
          {"dropout", o.dropout()},
          {"stochastic_depth", o.stochastic_depth()},
          {"seed", o.seed()},
          {"stem", stem_name(o.stem())},
          {"hidden_sizes", o.hidden_sizes()},
          {"num_layers", o.num_layers()},
          {"hidden_dim", o.hidden_dim()},
          {"num_heads", o.num_heads()},
          {"mlp_dim", o.mlp_dim()},
          {"patch_size", o.patch_size()},
          {"sub_layers", o.sub_layers()}};
}

models::model_options model_options_from_json(const nlohmann::json& j) {
  if (!j.is_object())
    throw std::invalid_argument("model options must be a JSON object");
  static const char* known[] = {
    "num_classes", "in_channels", "image_size", "width_mult", "seq_len",
    "vocab_size", "dropout", "stochastic_depth", "seed", "hidden_sizes",
    "num_layers", "hidden_dim", "num_heads", "mlp_dim", "patch_size", "stem",
    "sub_layers"};
  for (auto& [key, value] : j.items())
    if (std::find_if(std::begin(known), std::end(known),
                     [&](const char* k) { return key == k; })
        == std::end(known)) {
      std::string list;
      for (auto* k : known)
        list += (list.empty() ? "" : ", ") + std::string(k);
      throw std::invalid_argument("unknown model option '" + key + "' (known: "
                                  + list + ")");
    }
  models::model_options o;
  read(j, "num_classes", o.num_classes());
  read(j, "in_channels", o.in_channels());
  read(j, "image_size", o.image_size());
  read(j, "width_mult", o.width_mult());
  read(j, "seq_len", o.seq_len());
  read(j, "vocab_size", o.vocab_size());
  read(j, "dropout", o.dropout());
  read(j, "stochastic_depth", o.stochastic_depth());
  read(j, "seed", o.seed());
  read(j, "hidden_sizes", o.hidden_sizes());
  read(j, "num_layers", o.num_layers());
  read(j, "hidden_dim", o.hidden_dim());
  read(j, "num_heads", o.num_heads());
  read(j, "mlp_dim", o.mlp_dim());
  read(j, "patch_size", o.patch_size());
  read(j, "sub_layers", o.sub_layers());
  if (j.contains("stem")) {
    std::string s;
    read(j, "stem", s);
    o.stem(parse_stem(s));
  }
  return o;
}

} // namespace asteroid::training
