#include "asteroid/planner/pipedream_graph.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <istream>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace asteroid::planner {

namespace {

struct node {
  std::string id;
  std::string desc;
  double forward_ms = 0.0;
  double backward_ms = 0.0;
  double activation_bytes = 0.0;
  double parameter_bytes = 0.0;
  int line = 0;
};

struct edge {
  std::string from;
  std::string to;
  int line = 0;
};

std::string trim(const std::string& s) {
  auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos)
    return "";
  auto e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

std::vector<std::string> split(const std::string& s, const std::string& sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    auto pos = s.find(sep, start);
    if (pos == std::string::npos) {
      out.push_back(s.substr(start));
      return out;
    }
    out.push_back(s.substr(start, pos - start));
    start = pos + sep.size();
  }
}

class parser {
public:
  parser(const pipedream_import_options& opt, std::string source)
      : opt_(opt), source_(std::move(source)) {}

  model_profile parse(std::istream& in) {
    if (opt_.batch_size <= 0)
      throw std::runtime_error(source_ + ": batch_size must be positive (got " +
                               std::to_string(opt_.batch_size) + ")");
    if (!(opt_.optimizer_state_factor >= 0.0))
      throw std::runtime_error(source_ +
                               ": optimizer_state_factor must be >= 0");
    std::string text;
    while (std::getline(in, text)) {
      ++line_;
      auto t = trim(text);
      if (t.empty() || t[0] == '#')
        continue;
      auto tokens = split(t, " -- ");
      for (auto& tok : tokens)
        tok = trim(tok);
      if (tokens.size() == 2)
        parse_edge(tokens);
      else if (tokens.size() >= 3)
        parse_node(tokens);
      else
        fail_line("expected 'node -- desc -- metadata' or 'nodeA -- nodeB'");
    }
    if (nodes_.empty())
      throw std::runtime_error(source_ + ": no nodes");
    return build(chain());
  }

private:
  [[noreturn]] void fail_line(const std::string& what, int line = 0) const {
    throw std::runtime_error(source_ + ":" + std::to_string(line ? line : line_) +
                             ": " + what);
  }
  [[noreturn]] void fail_graph(const std::string& what) const {
    throw std::runtime_error(source_ + ": " + what + " (not a chain)");
  }

  void check_id(const std::string& id) const {
    if (id.empty() || id.find_first_of(" \t") != std::string::npos)
      fail_line("bad node id '" + id + "'");
  }

  double number(const std::string& key, const std::string& text) const {
    const char* begin = text.c_str();
    char* end = nullptr;
    errno = 0;
    double v = std::strtod(begin, &end);
    if (text.empty() || end != begin + text.size() || errno == ERANGE ||
        !std::isfinite(v))
      fail_line(key + ": '" + text + "' is not a number");
    if (v < 0)
      fail_line(key + ": " + text + " is negative");
    return v;
  }

  // "123.0" or "[1.0; 2.0]" (a multi-output node: summed).
  double sizes(const std::string& key, const std::string& text) const {
    if (text.empty() || text.front() != '[')
      return number(key, text);
    if (text.back() != ']')
      fail_line(key + ": unterminated list '" + text + "'");
    double sum = 0.0;
    for (const auto& part : split(text.substr(1, text.size() - 2), ";"))
      sum += number(key, trim(part));
    return sum;
  }

  void parse_node(const std::vector<std::string>& tokens) {
    node n;
    n.id = tokens[0];
    n.line = line_;
    check_id(n.id);
    // The description may itself contain " -- ": the metadata is the first
    // later token that starts with the first key.
    size_t meta = 2;
    while (meta < tokens.size() &&
           tokens[meta].rfind("forward_compute_time=", 0) != 0)
      ++meta;
    if (meta == tokens.size())
      fail_line("node " + n.id + ": no forward_compute_time=... metadata");
    for (size_t i = 1; i < meta; ++i)
      n.desc += (i > 1 ? " -- " : "") + tokens[i];
    for (size_t i = meta + 1; i < tokens.size(); ++i)
      if (tokens[i].rfind("stage_id=", 0) != 0)
        fail_line("node " + n.id + ": unexpected '" + tokens[i] + "'");
    std::map<std::string, std::string> kv;
    for (auto field : split(tokens[meta], ",")) {
      field = trim(field);
      auto eq = field.find('=');
      if (eq == std::string::npos)
        fail_line("node " + n.id + ": '" + field + "' is not key=value");
      kv[trim(field.substr(0, eq))] = trim(field.substr(eq + 1));
    }
    auto need = [&](const char* key) {
      auto it = kv.find(key);
      if (it == kv.end())
        fail_line("node " + n.id + ": missing " + key);
      return it->second;
    };
    n.forward_ms = number("forward_compute_time",
                          need("forward_compute_time"));
    n.backward_ms = number("backward_compute_time",
                           need("backward_compute_time"));
    n.activation_bytes = sizes("activation_size", need("activation_size"));
    n.parameter_bytes = number("parameter_size", need("parameter_size"));
    if (index_.count(n.id))
      fail_line("node " + n.id + " is defined twice (first on line " +
                std::to_string(nodes_[index_[n.id]].line) + ")");
    index_[n.id] = nodes_.size();
    nodes_.push_back(n);
  }

  void parse_edge(const std::vector<std::string>& tokens) {
    check_id(tokens[0]);
    check_id(tokens[1]);
    if (tokens[1].find('=') != std::string::npos)
      fail_line("expected 'nodeA -- nodeB', got metadata without a "
                "description");
    if (tokens[0] == tokens[1])
      fail_line("edge from " + tokens[0] + " to itself");
    edges_.push_back({tokens[0], tokens[1], line_});
  }

  // Node indices in chain order.
  std::vector<size_t> chain() const {
    size_t n = nodes_.size();
    std::vector<int> next(n, -1), prev(n, -1);
    auto lookup = [&](const std::string& id, int line) {
      auto it = index_.find(id);
      if (it == index_.end())
        fail_line("edge names unknown node " + id, line);
      return it->second;
    };
    for (const auto& e : edges_) {
      size_t a = lookup(e.from, e.line), b = lookup(e.to, e.line);
      if (next[a] >= 0)
        fail_graph("node " + e.from + " has several successors (" +
                   nodes_[next[a]].id + ", " + e.to + "; line " +
                   std::to_string(e.line) + ")");
      if (prev[b] >= 0)
        fail_graph("node " + e.to + " has several predecessors (" +
                   nodes_[prev[b]].id + ", " + e.from + "; line " +
                   std::to_string(e.line) + ")");
      next[a] = static_cast<int>(b);
      prev[b] = static_cast<int>(a);
    }
    std::vector<size_t> sources;
    for (size_t i = 0; i < n; ++i)
      if (prev[i] < 0)
        sources.push_back(i);
    if (sources.empty())
      fail_graph("no source node: the edges form a cycle");
    if (sources.size() > 1)
      fail_graph("nodes " + nodes_[sources[0]].id + " and " +
                 nodes_[sources[1]].id + " both have no predecessor");
    std::vector<size_t> order;
    for (int i = static_cast<int>(sources[0]); i >= 0; i = next[i])
      order.push_back(static_cast<size_t>(i));
    if (order.size() != n) {
      // One source and in/out degree <= 1 everywhere: the rest are cycles.
      std::vector<bool> seen(n, false);
      for (size_t i : order)
        seen[i] = true;
      for (size_t i = 0; i < n; ++i)
        if (!seen[i])
          fail_graph("node " + nodes_[i].id + " is on a cycle, unreachable "
                     "from " + nodes_[sources[0]].id);
    }
    return order;
  }

  model_profile build(const std::vector<size_t>& order) const {
    model_profile profile;
    profile.model = opt_.model;
    profile.device = opt_.device;
    auto b = static_cast<double>(opt_.batch_size);
    size_t first = 0;
    const auto& src = nodes_[order[0]];
    if (src.desc.rfind("Input", 0) == 0 && src.forward_ms == 0.0 &&
        src.backward_ms == 0.0 && src.parameter_bytes == 0.0) {
      profile.input_bytes_per_sample =
          static_cast<int64_t>(std::llround(src.activation_bytes / b));
      first = 1;
    }
    if (first == order.size())
      throw std::runtime_error(source_ + ": the graph has only its input node");
    for (size_t k = first; k < order.size(); ++k) {
      const auto& n = nodes_[order[k]];
      layer_profile l;
      l.name = n.desc.empty() ? n.id : n.desc;
      l.batch_sizes = {opt_.batch_size};
      l.forward_s = {n.forward_ms / 1000.0};
      l.backward_s = {n.backward_ms / 1000.0};
      l.output_bytes_per_sample =
          static_cast<int64_t>(std::llround(n.activation_bytes / b));
      l.param_bytes = static_cast<int64_t>(std::llround(n.parameter_bytes));
      l.optimizer_state_bytes = static_cast<int64_t>(
          std::llround(n.parameter_bytes * opt_.optimizer_state_factor));
      profile.layers.push_back(std::move(l));
    }
    return profile;
  }

  const pipedream_import_options& opt_;
  std::string source_;
  int line_ = 0;
  std::vector<node> nodes_;
  std::map<std::string, size_t> index_;
  std::vector<edge> edges_;
};

} // namespace

model_profile parse_pipedream_graph(std::istream& in,
                                    const pipedream_import_options& options,
                                    const std::string& source) {
  return parser(options, source).parse(in);
}

model_profile load_pipedream_graph(const std::string& path,
                                   const pipedream_import_options& options) {
  std::ifstream in(path);
  if (!in)
    throw std::runtime_error(path + ": cannot open PipeDream graph");
  return parse_pipedream_graph(in, options, path);
}

} // namespace asteroid::planner
