#pragma once

#include <nlohmann/json.hpp>

#include <fstream>
#include <functional>
#include <memory>
#include <string>

namespace asteroid::training {

/// Writes metrics as JSON lines (one object per line) to a file or stdout.
///
/// Every record gets a wall-clock `time` (seconds since the sink was made), so
/// a plot of accuracy against time needs no other source.
class metrics_sink {
public:
  /// `target`: a file path (truncated), "-" for stdout, empty for a sink that
  /// drops everything. Throws std::runtime_error if the file cannot be opened.
  explicit metrics_sink(const std::string& target);

  /// Writes `record` with "event" set to `event`.
  void emit(const std::string& event, nlohmann::json record);

  /// Also hands every record (with "event" and "time", as the JSON text a
  /// file or stdout gets) to `observer`, whether or not one gets it: a
  /// program subscribed to a running job sees its metrics file's lines.
  void set_observer(std::function<void(const std::string&)> observer) {
    observer_ = std::move(observer);
  }

  bool enabled() const { return out_ != nullptr; }

private:
  std::function<void(const std::string&)> observer_;
  std::unique_ptr<std::ofstream> file_;
  std::ostream* out_ = nullptr;
  double start_;
};

} // namespace asteroid::training
