#include "asteroid/planner/json_reader.hpp"

#include <cmath>
#include <limits>

namespace asteroid::planner {

using nlohmann::json;

json_field json_field::operator[](const std::string& key) const {
  return {where, path.empty() ? key : path + "." + key};
}

json_field json_field::operator[](size_t index) const {
  return {where, path + "[" + std::to_string(index) + "]"};
}

void json_field::fail(const std::string& what) const {
  throw json_error(where + ": " + (path.empty() ? "" : path + ": ") + what);
}

const json& member(const json& j, const json_field& f, const char* key) {
  if (!j.is_object())
    f.fail(std::string("expected an object, got ") + j.type_name());
  auto it = j.find(key);
  if (it == j.end())
    f[key].fail("missing");
  return *it;
}

const json* optional_member(const json& j, const char* key) {
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

void check_keys(const json& j, const json_field& f,
                std::initializer_list<const char*> known) {
  if (!j.is_object())
    f.fail(std::string("expected an object, got ") + j.type_name());
  for (auto it = j.begin(); it != j.end(); ++it) {
    bool ok = false;
    for (const char* k : known)
      ok = ok || it.key() == k;
    if (!ok) {
      std::string list;
      for (const char* k : known)
        list += std::string(list.empty() ? "" : ", ") + k;
      f[it.key()].fail("unknown field (known: " + list + ")");
    }
  }
}

double get_number(const json& j, const json_field& f) {
  if (!j.is_number())
    f.fail(std::string("expected a number, got ") + j.type_name());
  return j.get<double>();
}

double get_nonneg(const json& j, const json_field& f) {
  double x = get_number(j, f);
  if (!(x >= 0.0) || !std::isfinite(x))
    f.fail("expected a non-negative number, got " + j.dump());
  return x;
}

double get_positive(const json& j, const json_field& f) {
  double x = get_number(j, f);
  if (!(x > 0.0) || !std::isfinite(x))
    f.fail("expected a positive number, got " + j.dump());
  return x;
}

int64_t get_int(const json& j, const json_field& f) {
  if (!j.is_number_integer())
    f.fail(std::string("expected an integer, got ")
           + (j.is_number() ? j.dump() : j.type_name()));
  if (j.is_number_unsigned()
      && j.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    f.fail("integer out of range: " + j.dump());
  return j.get<int64_t>();
}

int64_t get_nonneg_int(const json& j, const json_field& f) {
  auto x = get_int(j, f);
  if (x < 0)
    f.fail("expected a non-negative integer, got " + std::to_string(x));
  return x;
}

int get_int_in(const json& j, const json_field& f, int lo, int hi) {
  auto x = get_int(j, f);
  if (x < lo || x > hi)
    f.fail("expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi)
           + "], got " + std::to_string(x));
  return static_cast<int>(x);
}

bool get_bool(const json& j, const json_field& f) {
  if (!j.is_boolean())
    f.fail(std::string("expected true or false, got ") + j.type_name());
  return j.get<bool>();
}

std::string get_string(const json& j, const json_field& f) {
  if (!j.is_string())
    f.fail(std::string("expected a string, got ") + j.type_name());
  return j.get<std::string>();
}

const json& get_array(const json& j, const json_field& f) {
  if (!j.is_array())
    f.fail(std::string("expected an array, got ") + j.type_name());
  return j;
}

void read_optional(const json& obj, const json_field& f, const char* key,
                   int& dst) {
  if (auto* x = optional_member(obj, key)) {
    auto v = get_int(*x, f[key]);
    if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max())
      f[key].fail("integer out of range: " + x->dump());
    dst = static_cast<int>(v);
  }
}

void read_optional(const json& obj, const json_field& f, const char* key,
                   int64_t& dst) {
  if (auto* x = optional_member(obj, key))
    dst = get_int(*x, f[key]);
}

void read_optional(const json& obj, const json_field& f, const char* key,
                   uint64_t& dst) {
  if (auto* x = optional_member(obj, key)) {
    if (!x->is_number_integer()
        || (!x->is_number_unsigned() && x->get<int64_t>() < 0))
      f[key].fail("expected a non-negative integer, got " + x->dump());
    dst = x->get<uint64_t>();
  }
}

void read_optional(const json& obj, const json_field& f, const char* key,
                   double& dst) {
  if (auto* x = optional_member(obj, key)) {
    auto v = get_number(*x, f[key]);
    if (!std::isfinite(v))
      f[key].fail("expected a finite number, got " + x->dump());
    dst = v;
  }
}

void read_optional(const json& obj, const json_field& f, const char* key,
                   bool& dst) {
  if (auto* x = optional_member(obj, key))
    dst = get_bool(*x, f[key]);
}

void read_optional(const json& obj, const json_field& f, const char* key,
                   std::string& dst) {
  if (auto* x = optional_member(obj, key))
    dst = get_string(*x, f[key]);
}

void read_optional(const json& obj, const json_field& f, const char* key,
                   std::vector<std::string>& dst) {
  if (auto* x = optional_member(obj, key)) {
    const auto& items = get_array(*x, f[key]);
    std::vector<std::string> out;
    for (size_t i = 0; i < items.size(); ++i)
      out.push_back(get_string(items[i], f[key][i]));
    dst = std::move(out);
  }
}

void read_optional(const json& obj, const json_field& f, const char* key,
                   std::vector<int64_t>& dst) {
  if (auto* x = optional_member(obj, key)) {
    const auto& items = get_array(*x, f[key]);
    std::vector<int64_t> out;
    for (size_t i = 0; i < items.size(); ++i)
      out.push_back(get_int(items[i], f[key][i]));
    dst = std::move(out);
  }
}

} // namespace asteroid::planner
