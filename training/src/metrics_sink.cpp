#include "asteroid/training/metrics_sink.hpp"
#include "monotonic_seconds.hpp"

#include <chrono>
#include <iostream>
#include <stdexcept>

namespace asteroid::training {

metrics_sink::metrics_sink(const std::string& target) : start_(detail::monotonic_seconds()) {
  if (target.empty())
    return;
  if (target == "-") {
    out_ = &std::cout;
    return;
  }
  file_ = std::make_unique<std::ofstream>(target, std::ios::trunc);
  if (!*file_)
    throw std::runtime_error("cannot open metrics file '" + target + "'");
  out_ = file_.get();
}

void metrics_sink::emit(const std::string& event, nlohmann::json record) {
  if (!out_ && !observer_)
    return;
  record["event"] = event;
  record["time"] = detail::monotonic_seconds() - start_;
  const auto line = record.dump();
  if (out_) {
    *out_ << line << '\n';
    out_->flush();
  }
  if (observer_)
    observer_(line);
}

} // namespace asteroid::training
