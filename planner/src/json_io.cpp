#include "asteroid/planner/json_io.hpp"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>

#include "asteroid/planner/device_catalog.hpp"
#include "asteroid/planner/error.hpp"
#include "asteroid/planner/json_reader.hpp"

namespace asteroid::planner {

using nlohmann::json;

namespace {

// Every reader of this file uses the one toolkit (json_reader.hpp).
using field = json_field;

int64_t parse_memory(const json& j, const field& f) {
  static const char* expected = "expected a number like \"4GiB\" or bytes";
  if (j.is_number_integer()) {
    auto v = j.get<int64_t>();
    if (v < 0)
      f.fail(std::string(expected) + ", got " + j.dump());
    return v;
  }
  // 2^63 bytes: beyond it a size no longer fits the int64 every budget is
  // kept in (1e300 used to wrap to a negative budget).
  constexpr double too_large = 9223372036854775808.0;
  if (j.is_number()) {
    double v = j.get<double>();
    if (!(v >= 0.0) || std::floor(v) != v)
      f.fail(std::string(expected) + ", got " + j.dump());
    if (!(v < too_large))
      f.fail(j.dump() + " bytes is too large (at most 2^63 - 1)");
    return static_cast<int64_t>(v);
  }
  if (!j.is_string())
    f.fail(std::string(expected) + ", got " + j.dump());
  auto s = j.get<std::string>();
  size_t pos = 0;
  while (pos < s.size() && std::isspace(static_cast<unsigned char>(s[pos])))
    ++pos;
  size_t num_begin = pos;
  while (pos < s.size() && (std::isdigit(static_cast<unsigned char>(s[pos])) || s[pos] == '.'))
    ++pos;
  if (pos == num_begin)
    f.fail(std::string(expected) + ", got " + j.dump());
  double value = 0.0;
  try {
    value = std::stod(s.substr(num_begin, pos - num_begin));
  } catch (const std::exception&) {
    f.fail(std::string(expected) + ", got " + j.dump());
  }
  while (pos < s.size() && std::isspace(static_cast<unsigned char>(s[pos])))
    ++pos;
  std::string unit;
  for (; pos < s.size(); ++pos)
    unit += static_cast<char>(std::tolower(static_cast<unsigned char>(s[pos])));
  while (!unit.empty() && std::isspace(static_cast<unsigned char>(unit.back())))
    unit.pop_back();
  double scale = 0.0;
  if (unit.empty() || unit == "b")
    scale = 1.0;
  else if (unit == "kb")
    scale = 1e3;
  else if (unit == "mb")
    scale = 1e6;
  else if (unit == "gb")
    scale = 1e9;
  else if (unit == "tb")
    scale = 1e12;
  else if (unit == "k" || unit == "kib")
    scale = 1024.0;
  else if (unit == "m" || unit == "mib")
    scale = 1024.0 * 1024.0;
  else if (unit == "g" || unit == "gib")
    scale = 1024.0 * 1024.0 * 1024.0;
  else if (unit == "t" || unit == "tib")
    scale = 1024.0 * 1024.0 * 1024.0 * 1024.0;
  else
    f.fail(std::string(expected) + ", got " + j.dump() + " (unknown unit \"" + unit + "\")");
  if (!(value * scale < too_large))
    f.fail(j.dump() + " is too large (at most 2^63 - 1 bytes)");
  return static_cast<int64_t>(std::llround(value * scale));
}

// --- model profile ---------------------------------------------------------

layer_profile parse_layer(const json& j, const field& f) {
  layer_profile l;
  l.name = get_string(member(j, f, "name"), f["name"]);
  const auto& bs = get_array(member(j, f, "batch_sizes"), f["batch_sizes"]);
  if (bs.empty())
    f["batch_sizes"].fail("expected at least one batch size");
  for (size_t i = 0; i < bs.size(); ++i) {
    auto b = get_int(bs[i], f["batch_sizes"][i]);
    if (b <= 0)
      f["batch_sizes"][i].fail("expected a positive batch size, got " + std::to_string(b));
    if (!l.batch_sizes.empty() && b <= l.batch_sizes.back())
      f["batch_sizes"][i].fail("batch sizes must be strictly ascending");
    l.batch_sizes.push_back(b);
  }
  for (const char* key : {"forward_s", "backward_s"}) {
    const auto& ts = get_array(member(j, f, key), f[key]);
    if (ts.size() != bs.size())
      f[key].fail("expected " + std::to_string(bs.size()) +
                  " times (one per batch size), got " + std::to_string(ts.size()));
    auto& out = std::string(key) == "forward_s" ? l.forward_s : l.backward_s;
    for (size_t i = 0; i < ts.size(); ++i)
      out.push_back(get_nonneg(ts[i], f[key][i]));
  }
  l.output_bytes_per_sample =
    get_nonneg_int(member(j, f, "output_bytes_per_sample"), f["output_bytes_per_sample"]);
  l.param_bytes = get_nonneg_int(member(j, f, "param_bytes"), f["param_bytes"]);
  if (auto* x = optional_member(j, "optimizer_state_bytes"))
    l.optimizer_state_bytes = get_nonneg_int(*x, f["optimizer_state_bytes"]);
  if (auto* x = optional_member(j, "working_bytes_per_sample"))
    l.working_bytes_per_sample = get_nonneg_int(*x, f["working_bytes_per_sample"]);
  if (auto* x = optional_member(j, "stashed_bytes_per_sample"))
    l.stashed_bytes_per_sample = get_nonneg_int(*x, f["stashed_bytes_per_sample"]);
  if (auto* x = optional_member(j, "optimizer_step_s"))
    l.optimizer_step_s = get_nonneg(*x, f["optimizer_step_s"]);
  return l;
}

// --- cluster ---------------------------------------------------------------

std::vector<std::vector<double>> parse_matrix(const json& j, const field& f, size_t n,
                                              bool positive) {
  const auto& rows = get_array(j, f);
  if (rows.size() != n)
    f.fail("expected " + std::to_string(n) + " rows (one per device), got " +
           std::to_string(rows.size()));
  std::vector<std::vector<double>> m(n, std::vector<double>(n, 0.0));
  for (size_t r = 0; r < n; ++r) {
    const auto& row = get_array(rows[r], f[r]);
    if (row.size() != n)
      f[r].fail("expected " + std::to_string(n) + " columns (one per device), got " +
                std::to_string(row.size()));
    for (size_t c = 0; c < n; ++c) {
      if (r == c) {
        get_number(row[c], f[r][c]); // unused diagonal, but still a number
        continue;
      }
      m[r][c] = positive ? get_positive(row[c], f[r][c]) : get_nonneg(row[c], f[r][c]);
    }
  }
  return m;
}

bool is_uniform(const std::vector<std::vector<double>>& m, double& value) {
  bool first = true;
  for (size_t r = 0; r < m.size(); ++r)
    for (size_t c = 0; c < m.size(); ++c) {
      if (r == c)
        continue;
      if (first) {
        value = m[r][c];
        first = false;
      } else if (m[r][c] != value) {
        return false;
      }
    }
  if (first)
    value = 0.0;
  return true;
}

// --- plan ------------------------------------------------------------------

stage_plan parse_stage(const json& j, const field& f) {
  stage_plan s;
  constexpr int most = std::numeric_limits<int>::max();
  s.first_layer = get_int_in(member(j, f, "first_layer"), f["first_layer"], 0, most);
  s.end_layer = get_int_in(member(j, f, "end_layer"), f["end_layer"], 0, most);
  const auto& ds = get_array(member(j, f, "devices"), f["devices"]);
  for (size_t i = 0; i < ds.size(); ++i)
    s.devices.push_back(get_int_in(ds[i], f["devices"][i], 0, most));
  const auto& ss = get_array(member(j, f, "shares"), f["shares"]);
  if (ss.size() != ds.size())
    f["shares"].fail("expected " + std::to_string(ds.size()) +
                     " shares (one per device), got " + std::to_string(ss.size()));
  for (size_t i = 0; i < ss.size(); ++i)
    s.shares.push_back(get_nonneg_int(ss[i], f["shares"][i]));
  return s;
}

// --- instructions ------------------------------------------------------------

instruction parse_instruction(const json& j, const field& f) {
  if (!j.is_object())
    f.fail(std::string("expected an object, got ") + j.type_name());
  check_keys(j, f, {"op", "mb", "peer"});
  instruction in;
  auto mnemonic = get_string(member(j, f, "op"), f["op"]);
  try {
    in.kind = parse_op(mnemonic);
  } catch (const std::invalid_argument& e) {
    f["op"].fail(e.what());
  }
  // -1 ("does not apply") is the default; anything below it is an error.
  auto index = [&](const char* key) {
    auto* x = optional_member(j, key);
    if (!x)
      return -1;
    auto v = get_int(*x, f[key]);
    if (v < -1 || v > (int64_t{1} << 30))
      f[key].fail("out of range: " + std::to_string(v));
    return static_cast<int>(v);
  };
  in.micro_batch = index("mb");
  in.peer_stage = index("peer");
  return in;
}

json read_json_file(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    throw planner_error(path + ": cannot open file");
  try {
    return json::parse(in);
  } catch (const json::parse_error& e) {
    throw planner_error(path + ": invalid JSON: " + e.what());
  }
}

void write_json_file(const json& j, const std::string& path) {
  std::ofstream out(path);
  if (!out)
    throw planner_error(path + ": cannot open file for writing");
  out << j.dump(2) << '\n';
  if (!out)
    throw planner_error(path + ": write failed");
}

} // namespace

int64_t parse_memory_size(const json& j, const std::string& where) {
  return parse_memory(j, field{where, ""});
}

std::string format_bytes(int64_t bytes) {
  char buf[64];
  double b = static_cast<double>(bytes);
  double a = std::fabs(b);
  if (a >= 1024.0 * 1024.0 * 1024.0)
    std::snprintf(buf, sizeof(buf), "%.2f GiB", b / (1024.0 * 1024.0 * 1024.0));
  else if (a >= 1024.0 * 1024.0)
    std::snprintf(buf, sizeof(buf), "%.1f MiB", b / (1024.0 * 1024.0));
  else if (a >= 1024.0)
    std::snprintf(buf, sizeof(buf), "%.1f KiB", b / 1024.0);
  else
    std::snprintf(buf, sizeof(buf), "%lld B", static_cast<long long>(bytes));
  return buf;
}

model_profile parse_model_profile(const json& j, const std::string& where) {
  field f{where, ""};
  model_profile p;
  p.model = get_string(member(j, f, "model"), f["model"]);
  if (auto* x = optional_member(j, "device"))
    p.device = get_string(*x, f["device"]);
  p.input_bytes_per_sample =
    get_nonneg_int(member(j, f, "input_bytes_per_sample"), f["input_bytes_per_sample"]);
  const auto& layers = get_array(member(j, f, "layers"), f["layers"]);
  if (layers.empty())
    f["layers"].fail("expected at least one layer");
  for (size_t i = 0; i < layers.size(); ++i)
    p.layers.push_back(parse_layer(layers[i], f["layers"][i]));
  if (auto* x = optional_member(j, "state_snapshots"))
    p.state_snapshots = get_bool(*x, f["state_snapshots"]);
  return p;
}

cluster parse_cluster(const json& j, const std::string& where) {
  field f{where, ""};
  if (!j.is_object())
    f.fail(std::string("expected an object, got ") + j.type_name());
  check_keys(j, f, {"name", "description", "devices", "link_mbps", "bandwidth_mbps", "latency_ms",
                    "co_location_slowdown", "activation_wire_ratio", "gradient_wire_ratio",
                    "all_reduce_wire_ratio", "compress_below_mbps", "full_duplex_links"});
  cluster c;
  if (auto* x = optional_member(j, "name"))
    c.name = get_string(*x, f["name"]);
  const auto& devs = get_array(member(j, f, "devices"), f["devices"]);
  if (devs.empty())
    f["devices"].fail("expected at least one device");
  for (size_t i = 0; i < devs.size(); ++i) {
    auto df = f["devices"][i];
    const auto& dj = devs[i];
    if (!dj.is_object())
      df.fail(std::string("expected an object, got ") + dj.type_name());
    check_keys(dj, df, {"name", "type", "speed", "memory", "endpoint", "seconds_per_sample"});
    device_spec d;
    d.name = "device-" + std::to_string(i);
    if (auto* x = optional_member(dj, "name"))
      d.name = get_string(*x, df["name"]);
    const device_type_info* info = nullptr;
    if (auto* x = optional_member(dj, "type")) {
      d.type = get_string(*x, df["type"]);
      info = find_device_type(d.type);
    }
    if (auto* x = optional_member(dj, "speed")) {
      d.speed = get_positive(*x, df["speed"]);
    } else if (info) {
      d.speed = info->speed;
    } else if (!d.type.empty()) {
      std::string known;
      for (const auto& t : device_catalog())
        known += (known.empty() ? "" : ", ") + t.type;
      df["type"].fail("unknown device type \"" + d.type + "\" (known: " + known +
                      "); give \"speed\" explicitly");
    } else {
      df.fail("expected \"type\" (from the catalog) or \"speed\"");
    }
    if (d.type.empty())
      d.type = "custom";
    if (auto* x = optional_member(dj, "memory")) {
      d.memory_bytes = parse_memory(*x, df["memory"]);
    } else if (info) {
      d.memory_bytes = info->default_budget_bytes;
    } else {
      df["memory"].fail("missing (required when the type is not in the catalog)");
    }
    if (auto* x = optional_member(dj, "endpoint"))
      d.endpoint = get_string(*x, df["endpoint"]);
    if (auto* x = optional_member(dj, "seconds_per_sample")) {
      auto sf = df["seconds_per_sample"];
      if (!x->is_object())
        sf.fail(std::string("expected an object of model name: seconds, got ") +
                x->type_name());
      for (auto it = x->begin(); it != x->end(); ++it)
        d.seconds_per_sample[it.key()] = get_positive(it.value(), sf[it.key()]);
    }
    for (size_t k = 0; k < c.devices.size(); ++k)
      if (c.devices[k].name == d.name)
        df["name"].fail("duplicate device name \"" + d.name + "\" (also devices[" +
                        std::to_string(k) + "])");
    c.devices.push_back(std::move(d));
  }
  auto n = c.devices.size();
  auto* uniform = optional_member(j, "link_mbps");
  auto* matrix = optional_member(j, "bandwidth_mbps");
  if (uniform && matrix)
    f.fail("give either \"link_mbps\" or \"bandwidth_mbps\", not both");
  if (!uniform && !matrix)
    f["link_mbps"].fail("missing (give \"link_mbps\" or a \"bandwidth_mbps\" matrix)");
  if (uniform) {
    double mbps = get_positive(*uniform, f["link_mbps"]);
    c.bandwidth_Bps.assign(n, std::vector<double>(n, mbps * 1e6 / 8.0));
  } else {
    auto m = parse_matrix(*matrix, f["bandwidth_mbps"], n, true);
    for (auto& row : m)
      for (auto& x : row)
        x = x * 1e6 / 8.0;
    c.bandwidth_Bps = std::move(m);
  }
  c.latency_s.assign(n, std::vector<double>(n, 0.0));
  if (auto* lat = optional_member(j, "latency_ms")) {
    if (lat->is_array()) {
      auto m = parse_matrix(*lat, f["latency_ms"], n, false);
      for (auto& row : m)
        for (auto& x : row)
          x /= 1000.0;
      c.latency_s = std::move(m);
    } else {
      double ms = get_nonneg(*lat, f["latency_ms"]);
      c.latency_s.assign(n, std::vector<double>(n, ms / 1000.0));
    }
  }
  for (size_t i = 0; i < n; ++i) {
    c.bandwidth_Bps[i][i] = 0.0;
    c.latency_s[i][i] = 0.0;
  }
  if (auto* x = optional_member(j, "co_location_slowdown")) {
    c.co_location_slowdown = get_positive(*x, f["co_location_slowdown"]);
    if (c.co_location_slowdown < 1.0)
      f["co_location_slowdown"].fail("expected at least 1 (a factor by which devices that share "
                                     "a machine compute slower), got " + x->dump());
  }
  for (auto [key, ratio] : {std::pair{"activation_wire_ratio", &c.activation_wire_ratio},
                            std::pair{"gradient_wire_ratio", &c.gradient_wire_ratio},
                            std::pair{"all_reduce_wire_ratio", &c.all_reduce_wire_ratio}})
    if (auto* x = optional_member(j, key)) {
      *ratio = get_positive(*x, f[key]);
      if (*ratio > 1.0)
        f[key].fail("expected a ratio in (0, 1] (bytes on the wire per float32 byte), got "
                    + x->dump());
    }
  if (auto* x = optional_member(j, "compress_below_mbps"))
    c.compress_below_Bps = get_positive(*x, f["compress_below_mbps"]) * 1e6 / 8.0;
  if (auto* x = optional_member(j, "full_duplex_links"))
    c.full_duplex_links = get_bool(*x, f["full_duplex_links"]);
  return c;
}

plan parse_plan(const json& j, const std::string& where) {
  field f{where, ""};
  plan p;
  if (auto* x = optional_member(j, "planner"))
    p.planner = get_string(*x, f["planner"]);
  p.batch_size = get_int(member(j, f, "batch_size"), f["batch_size"]);
  if (p.batch_size <= 0)
    f["batch_size"].fail("expected a positive integer, got " + std::to_string(p.batch_size));
  p.micro_batches = get_int_in(member(j, f, "micro_batches"), f["micro_batches"], 1,
                              std::numeric_limits<int>::max());
  const auto& stages = get_array(member(j, f, "stages"), f["stages"]);
  for (size_t i = 0; i < stages.size(); ++i)
    p.stages.push_back(parse_stage(stages[i], f["stages"][i]));
  if (auto* pred = optional_member(j, "predicted")) {
    auto pf = f["predicted"];
    if (auto* x = optional_member(*pred, "round_s"))
      p.predicted_round_s = get_nonneg(*x, pf["round_s"]);
    if (auto* x = optional_member(*pred, "samples_per_s"))
      p.predicted_samples_per_s = get_nonneg(*x, pf["samples_per_s"]);
    if (auto* x = optional_member(*pred, "simulated_round_s"))
      p.simulated_round_s = get_nonneg(*x, pf["simulated_round_s"]);
    if (auto* x = optional_member(*pred, "simulated_samples_per_s"))
      p.simulated_samples_per_s = get_nonneg(*x, pf["simulated_samples_per_s"]);
    if (auto* x = optional_member(*pred, "memory_bytes")) {
      const auto& m = get_array(*x, pf["memory_bytes"]);
      for (size_t i = 0; i < m.size(); ++i)
        p.predicted_memory_bytes.push_back(get_nonneg_int(m[i], pf["memory_bytes"][i]));
    }
  }
  return p;
}

void to_json(json& j, const layer_profile& x) {
  j = json{{"name", x.name},
           {"batch_sizes", x.batch_sizes},
           {"forward_s", x.forward_s},
           {"backward_s", x.backward_s},
           {"output_bytes_per_sample", x.output_bytes_per_sample},
           {"param_bytes", x.param_bytes},
           {"optimizer_state_bytes", x.optimizer_state_bytes},
           {"working_bytes_per_sample", x.working_bytes_per_sample},
           {"stashed_bytes_per_sample", x.stashed_bytes_per_sample}};
  // An unmeasured time stays out, as before it was measured.
  if (x.optimizer_step_s > 0)
    j["optimizer_step_s"] = x.optimizer_step_s;
}

void from_json(const json& j, layer_profile& x) {
  x = parse_layer(j, field{"layer_profile", ""});
}

void to_json(json& j, const model_profile& x) {
  j = json{{"model", x.model},
           {"device", x.device},
           {"input_bytes_per_sample", x.input_bytes_per_sample},
           {"layers", x.layers},
           {"state_snapshots", x.state_snapshots}};
}

void from_json(const json& j, model_profile& x) {
  x = parse_model_profile(j, "model_profile");
}

void to_json(json& j, const device_spec& x) {
  j = json{{"name", x.name}, {"type", x.type}, {"speed", x.speed}, {"memory", x.memory_bytes}};
  if (!x.endpoint.empty())
    j["endpoint"] = x.endpoint;
  if (!x.seconds_per_sample.empty())
    j["seconds_per_sample"] = x.seconds_per_sample;
}

void from_json(const json& j, device_spec& x) {
  // A lone device is parsed as a one-device cluster so both share the rules.
  json c{{"devices", json::array({j})}, {"link_mbps", 1}};
  x = parse_cluster(c, "device").devices.at(0);
}

void to_json(json& j, const cluster& x) {
  j = json::object();
  j["name"] = x.name;
  j["devices"] = x.devices;
  auto n = x.devices.size();
  auto mbps = [](double Bps) { return Bps * 8.0 / 1e6; };
  double u = 0.0;
  if (n > 1 && is_uniform(x.bandwidth_Bps, u)) {
    j["link_mbps"] = mbps(u);
  } else if (n <= 1) {
    j["link_mbps"] = 1000.0; // no links: any positive rate round-trips
  } else {
    json m = json::array();
    for (size_t r = 0; r < n; ++r) {
      json row = json::array();
      for (size_t c = 0; c < n; ++c)
        row.push_back(r == c ? 0.0 : mbps(x.bandwidth_Bps[r][c]));
      m.push_back(row);
    }
    j["bandwidth_mbps"] = m;
  }
  double l = 0.0;
  if (x.latency_s.size() == n && is_uniform(x.latency_s, l)) {
    if (l != 0.0)
      j["latency_ms"] = l * 1000.0;
  } else if (x.latency_s.size() == n) {
    json m = json::array();
    for (size_t r = 0; r < n; ++r) {
      json row = json::array();
      for (size_t c = 0; c < n; ++c)
        row.push_back(r == c ? 0.0 : x.latency_s[r][c] * 1000.0);
      m.push_back(row);
    }
    j["latency_ms"] = m;
  }
  if (x.co_location_slowdown != 1.0)
    j["co_location_slowdown"] = x.co_location_slowdown;
  if (x.activation_wire_ratio != 1.0)
    j["activation_wire_ratio"] = x.activation_wire_ratio;
  if (x.gradient_wire_ratio != 1.0)
    j["gradient_wire_ratio"] = x.gradient_wire_ratio;
  if (x.all_reduce_wire_ratio != 1.0)
    j["all_reduce_wire_ratio"] = x.all_reduce_wire_ratio;
  if (x.compress_below_Bps > 0.0)
    j["compress_below_mbps"] = x.compress_below_Bps * 8.0 / 1e6;
  if (x.full_duplex_links)
    j["full_duplex_links"] = true;
}

void from_json(const json& j, cluster& x) {
  x = parse_cluster(j, "cluster");
}

void to_json(json& j, const stage_plan& x) {
  j = json{{"first_layer", x.first_layer},
           {"end_layer", x.end_layer},
           {"devices", x.devices},
           {"shares", x.shares}};
}

void from_json(const json& j, stage_plan& x) {
  x = parse_stage(j, field{"stage", ""});
}

void to_json(json& j, const plan& x) {
  j = json{{"planner", x.planner},
           {"batch_size", x.batch_size},
           {"micro_batches", x.micro_batches},
           {"stages", x.stages},
           {"predicted",
            {{"round_s", x.predicted_round_s},
             {"samples_per_s", x.predicted_samples_per_s},
             {"simulated_round_s", x.simulated_round_s},
             {"simulated_samples_per_s", x.simulated_samples_per_s},
             {"memory_bytes", x.predicted_memory_bytes}}}};
}

void from_json(const json& j, plan& x) {
  x = parse_plan(j, "plan");
}

void to_json(json& j, const instruction& x) {
  j = json{{"op", to_string(x.kind)}};
  if (x.micro_batch >= 0)
    j["mb"] = x.micro_batch;
  if (x.peer_stage >= 0)
    j["peer"] = x.peer_stage;
}

void from_json(const json& j, instruction& x) {
  x = parse_instruction(j, field{"instruction", ""});
}

layer_profile parse_layer_profile(const json& j, const json_field& f) {
  return parse_layer(j, f);
}

std::vector<instruction> parse_instructions(const json& j, const std::string& where) {
  field f{where, ""};
  const auto& items = get_array(j, f);
  std::vector<instruction> out;
  out.reserve(items.size());
  for (size_t i = 0; i < items.size(); ++i)
    out.push_back(parse_instruction(items[i], f[i]));
  return out;
}

model_profile load_model_profile_file(const std::string& path) {
  return parse_model_profile(read_json_file(path), path);
}

void save_model_profile_file(const model_profile& x, const std::string& path) {
  write_json_file(json(x), path);
}

cluster load_cluster_file(const std::string& path) {
  return parse_cluster(read_json_file(path), path);
}

void save_cluster_file(const cluster& x, const std::string& path) {
  write_json_file(json(x), path);
}

plan load_plan_file(const std::string& path) {
  return parse_plan(read_json_file(path), path);
}

void save_plan_file(const plan& x, const std::string& path) {
  write_json_file(json(x), path);
}

} // namespace asteroid::planner
