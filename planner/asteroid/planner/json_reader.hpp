#pragma once
/// \file
/// The one toolkit that reads JSON documents field by field (cluster, profile
/// and plan files, job files, replica specs): every error names the document
/// and the field, `"job.json: fault_tolerance.heartbeat_ms: expected an
/// integer, got \"fast\""`, and unknown keys are errors, so that a typo does
/// not pass silently.
#include "asteroid/planner/error.hpp"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace asteroid::planner {

/// A JSON document that does not say what it must.
class json_error : public planner_error {
public:
  using planner_error::planner_error;
};

/// A position in a document: `where` (a file name, "plan") and the path to
/// the field inside it ("devices[2].memory").
struct json_field {
  std::string where;
  std::string path;

  json_field operator[](const std::string& key) const;
  json_field operator[](size_t index) const;
  /// Throws json_error "where: path: what".
  [[noreturn]] void fail(const std::string& what) const;
};

/// `j[key]`; fails naming `f[key]` when `j` is not an object or lacks it.
const nlohmann::json& member(const nlohmann::json& j, const json_field& f,
                             const char* key);
/// `&j[key]`, or null when it is missing or null.
const nlohmann::json* optional_member(const nlohmann::json& j, const char* key);
/// Fails on `j` not being an object, or on a key outside `known`.
void check_keys(const nlohmann::json& j, const json_field& f,
                std::initializer_list<const char*> known);

double get_number(const nlohmann::json& j, const json_field& f);
double get_nonneg(const nlohmann::json& j, const json_field& f);
double get_positive(const nlohmann::json& j, const json_field& f);
int64_t get_int(const nlohmann::json& j, const json_field& f);
int64_t get_nonneg_int(const nlohmann::json& j, const json_field& f);
/// An integer in [lo, hi]: what fits the `int` a field is stored in, where a
/// plain cast would wrap (4294967298 micro-batches read as 2).
int get_int_in(const nlohmann::json& j, const json_field& f, int lo, int hi);
bool get_bool(const nlohmann::json& j, const json_field& f);
std::string get_string(const nlohmann::json& j, const json_field& f);
const nlohmann::json& get_array(const nlohmann::json& j, const json_field& f);

/// Reads an optional field of object `obj` into `dst`, which keeps its value
/// when the field is missing; fails naming the field on a wrong type or an
/// integer out of `dst`'s range.
void read_optional(const nlohmann::json& obj, const json_field& f,
                   const char* key, int& dst);
void read_optional(const nlohmann::json& obj, const json_field& f,
                   const char* key, int64_t& dst);
void read_optional(const nlohmann::json& obj, const json_field& f,
                   const char* key, uint64_t& dst);
void read_optional(const nlohmann::json& obj, const json_field& f,
                   const char* key, double& dst);
void read_optional(const nlohmann::json& obj, const json_field& f,
                   const char* key, bool& dst);
void read_optional(const nlohmann::json& obj, const json_field& f,
                   const char* key, std::string& dst);
void read_optional(const nlohmann::json& obj, const json_field& f,
                   const char* key, std::vector<std::string>& dst);
void read_optional(const nlohmann::json& obj, const json_field& f,
                   const char* key, std::vector<int64_t>& dst);

/// read_optional for a number that must be at least `lo` when present;
/// fails naming the field and the bound.
template <class T>
void read_optional_at_least(const nlohmann::json& obj, const json_field& f, const char* key,
                            T& dst, T lo) {
  read_optional(obj, f, key, dst);
  if (dst < lo)
    f[key].fail("must be >= " + std::to_string(lo));
}

/// read_optional for a number that must be in [lo, hi] when present.
template <class T>
void read_optional_in(const nlohmann::json& obj, const json_field& f, const char* key, T& dst,
                      T lo, T hi) {
  read_optional(obj, f, key, dst);
  if (dst < lo || dst > hi)
    f[key].fail("must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got "
                 + std::to_string(dst));
}

/// The same for a field that must be there.
template <class T>
void read_required(const nlohmann::json& obj, const json_field& f,
                   const char* key, T& dst) {
  member(obj, f, key); // fails naming the missing field
  read_optional(obj, f, key, dst);
}

} // namespace asteroid::planner
