#include "asteroid/actors/snapshot_store.hpp"

#include "asteroid/serialization/tensor_wire.hpp"

#include <set>

namespace asteroid::actors {

bool snapshot_store::parse_key(const std::string& key, int& first, int& end) {
  if (key.size() < 4 || key[0] != 'L')
    return false;
  auto dash = key.find('-');
  if (dash == std::string::npos)
    return false;
  try {
    size_t used = 0;
    first = std::stoi(key.substr(1, dash - 1), &used);
    if (used != dash - 1)
      return false;
    end = std::stoi(key.substr(dash + 1), &used);
    if (used != key.size() - dash - 1)
      return false;
  } catch (const std::exception&) {
    return false;
  }
  return first >= 0 && end > first;
}

std::string snapshot_store::put(const std::string& key, int64_t version,
                                std::string state) {
  int a = 0, b = 0;
  if (!parse_key(key, a, b))
    return "bad snapshot key '" + key + "'";
  if (version < 0)
    return "bad snapshot version " + std::to_string(version);
  auto& versions = entries_[key];
  versions[version] = std::make_shared<const std::string>(std::move(state));
  while (static_cast<int>(versions.size()) > keep_)
    versions.erase(versions.begin());
  return {};
}

void snapshot_store::erase(const std::string& key, int64_t version) {
  auto k = entries_.find(key);
  if (k == entries_.end())
    return;
  k->second.erase(version);
  if (k->second.empty())
    entries_.erase(k);
}

snapshot_bytes snapshot_store::get(const std::string& key, int64_t version) const {
  auto k = entries_.find(key);
  if (k == entries_.end())
    return nullptr;
  auto v = k->second.find(version);
  if (v == k->second.end())
    return nullptr;
  return v->second;
}

nlohmann::json snapshot_store::inventory() const {
  auto out = nlohmann::json::object();
  for (auto& [key, versions] : entries_) {
    auto list = nlohmann::json::array();
    for (auto& [v, bytes] : versions)
      list.push_back(v);
    out[key] = list;
  }
  return out;
}

std::string snapshot_store::assemble(int first, int end,
                                     int64_t version) const {
  return merge(parts(first, end, version));
}

std::vector<snapshot_bytes> snapshot_store::parts(int first, int end,
                                                  int64_t version) const {
  // Greedy tiling: from `at`, the held range starting there that reaches
  // furthest without passing `end`.
  std::vector<snapshot_bytes> out;
  int at = first;
  while (at < end) {
    snapshot_bytes best;
    int best_end = at;
    for (auto& [key, versions] : entries_) {
      int a = 0, b = 0;
      if (!parse_key(key, a, b) || a != at || b > end || b <= best_end)
        continue;
      auto v = versions.find(version);
      if (v == versions.end())
        continue;
      best = v->second;
      best_end = b;
    }
    if (!best)
      return {};
    out.push_back(std::move(best));
    at = best_end;
  }
  return out;
}

std::string snapshot_store::merge(const std::vector<snapshot_bytes>& parts) {
  if (parts.empty())
    return {};
  if (parts.size() == 1)
    return *parts[0];
  serialization::named_tensors merged;
  std::set<std::string> seen;
  for (auto& p : parts)
    for (auto& [name, t] : serialization::decode_tensors(*p))
      if (seen.insert(name).second)
        merged.emplace_back(name, t);
  return serialization::encode_tensors(merged);
}

size_t snapshot_store::bytes() const {
  size_t n = 0;
  for (auto& [key, versions] : entries_)
    for (auto& [v, bytes] : versions)
      n += bytes->size();
  return n;
}

} // namespace asteroid::actors
