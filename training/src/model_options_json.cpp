#include "asteroid/training/model_options_json.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

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

[[noreturn]] void refuse(const char* key, const std::string& why) {
  throw std::invalid_argument(std::string{"model option '"} + key + "': " + why);
}

/// An integer option, at least `lo`. A number with a fraction (2.7) or one
/// past 64 bits is refused rather than cut to an integer.
void read_int(const nlohmann::json& j, const char* key, int64_t& out, int64_t lo) {
  if (!j.contains(key))
    return;
  const auto& v = j.at(key);
  if (!v.is_number_integer()
      || (v.is_number_unsigned()
          && v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())))
    refuse(key, "expected an integer, got " + v.dump());
  auto x = v.get<int64_t>();
  if (x < lo)
    refuse(key, "must be >= " + std::to_string(lo) + ", got " + std::to_string(x));
  out = x;
}

/// A finite number option in (lo, hi] (`lo_open`) or [lo, hi) (else).
void read_real(const nlohmann::json& j, const char* key, double& out, double lo, double hi,
               bool lo_open, const std::string& range) {
  if (!j.contains(key))
    return;
  const auto& v = j.at(key);
  if (!v.is_number())
    refuse(key, "expected a number, got " + v.dump());
  double x = v.get<double>();
  bool inside = lo_open ? (x > lo && x <= hi) : (x >= lo && x < hi);
  if (!std::isfinite(x) || !inside)
    refuse(key, "must be " + range + ", got " + v.dump());
  out = x;
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
  const double huge = std::numeric_limits<double>::max();
  read_int(j, "num_classes", o.num_classes(), 1);
  read_int(j, "in_channels", o.in_channels(), 0); // 0: the model's default
  read_int(j, "image_size", o.image_size(), 0);
  read_real(j, "width_mult", o.width_mult(), 0, 16, true, "in (0, 16]");
  read_int(j, "seq_len", o.seq_len(), 1);
  read_int(j, "vocab_size", o.vocab_size(), 1);
  // Negative: the model's reference value.
  read_real(j, "dropout", o.dropout(), -huge, 1, false, "below 1 (negative: the reference value)");
  read_real(j, "stochastic_depth", o.stochastic_depth(), -huge, 1, false,
            "below 1 (negative: the reference value)");
  read_int(j, "seed", o.seed(), std::numeric_limits<int64_t>::min());
  if (j.contains("hidden_sizes")) {
    const auto& v = j.at("hidden_sizes");
    if (!v.is_array())
      refuse("hidden_sizes", "expected an array of widths, got " + v.dump());
    std::vector<int64_t> widths;
    for (const auto& w : v) {
      if (!w.is_number_integer() || w.get<int64_t>() < 1 || w.get<double>() > 1e9)
        refuse("hidden_sizes", "every width must be an integer in [1, 1e9], got " + w.dump());
      widths.push_back(w.get<int64_t>());
    }
    o.hidden_sizes(widths);
  }
  read_int(j, "num_layers", o.num_layers(), 0); // 0: the preset's
  read_int(j, "hidden_dim", o.hidden_dim(), 0);
  read_int(j, "num_heads", o.num_heads(), 0);
  read_int(j, "mlp_dim", o.mlp_dim(), 0);
  read_int(j, "patch_size", o.patch_size(), 0);
  read(j, "sub_layers", o.sub_layers());
  if (j.contains("stem")) {
    std::string s;
    read(j, "stem", s);
    o.stem(parse_stem(s));
  }
  return o;
}

} // namespace asteroid::training
