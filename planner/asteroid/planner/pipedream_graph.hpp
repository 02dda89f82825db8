#pragma once

#include "asteroid/planner/model_profile.hpp"

#include <cstdint>
#include <iosfwd>
#include <string>

namespace asteroid::planner {

/// How to read a PipeDream profile.
struct pipedream_import_options {
  /// Batch size the graph was profiled at (required): times and activation
  /// sizes in graph.txt are for a whole batch of this size.
  int64_t batch_size = 0;
  /// `model_profile::model`.
  std::string model = "pipedream";
  /// `model_profile::device`: the device type the times were measured on.
  std::string device = "profiled";
  /// Optimizer state bytes per parameter byte (graph.txt has none):
  /// 0 for plain SGD, 1 for momentum SGD, 2 for Adam.
  double optimizer_state_factor = 1.0;
};

/// Reads a PipeDream/DAPPLE `graph.txt` profile of a chain model.
///
/// Node lines:
/// `node<N> -- <desc> -- forward_compute_time=<ms>, backward_compute_time=<ms>,
/// activation_size=<bytes>, parameter_size=<bytes>[ -- stage_id=<k>]`;
/// `activation_size` may be a list `[a; b]` (outputs of a multi-output node,
/// summed). Edge lines: `node<A> -- node<B>` (PipeDream indents them with a
/// tab). Blank lines and lines starting with `#` are skipped; unknown
/// `key=value` metadata is ignored, and so is `stage_id` (Asteroid plans its
/// own stages).
///
/// The nodes must form a chain; it is followed from its source, not in file
/// order. A source node whose description starts with "Input" and that has
/// no compute time and no parameters is the model input: its activation
/// gives `input_bytes_per_sample` and it is not a layer. Every other node is
/// one layer with one sample point at `batch_size`: times in seconds,
/// `output_bytes_per_sample` = activation_size / batch_size (rounded),
/// `param_bytes` = parameter_size, `optimizer_state_bytes` = parameter_size
/// times `optimizer_state_factor`; working memory is unknown (0).
///
/// Throws std::runtime_error naming `source` and the line number for a
/// malformed line, the node for a graph that is not a chain (branch, join,
/// cycle, second source), and the option for a bad batch size.
model_profile parse_pipedream_graph(std::istream& in,
                                    const pipedream_import_options& options,
                                    const std::string& source = "graph.txt");

/// `parse_pipedream_graph` of a file; throws std::runtime_error naming the
/// path if it cannot be read.
model_profile load_pipedream_graph(const std::string& path,
                                   const pipedream_import_options& options);

} // namespace asteroid::planner
