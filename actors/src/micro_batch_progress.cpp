#include "asteroid/actors/micro_batch_progress.hpp"

namespace asteroid::actors {

namespace {

constexpr uint8_t bit(int32_t pass) { return static_cast<uint8_t>(1u << pass); }

const char* pass_name(int32_t pass) {
  return pass == pass_forward ? "forward" : "backward";
}

} // namespace

micro_batch_progress::micro_batch_progress(micro_batch_route route)
  : route_(std::move(route)) {
  for (auto& pieces : route_.stages) {
    first_piece_.push_back(done_.size());
    done_.resize(done_.size() + pieces.size(), 0);
  }
  remaining_ = static_cast<int64_t>(done_.size());
}

std::optional<size_t> micro_batch_progress::index_of(int32_t stage,
                                                     int32_t replica) const {
  if (stage < 0 || static_cast<size_t>(stage) >= route_.stages.size())
    return std::nullopt;
  const auto& pieces = route_.stages[static_cast<size_t>(stage)];
  for (size_t i = 0; i < pieces.size(); ++i)
    if (pieces[i].replica == replica)
      return first_piece_[static_cast<size_t>(stage)] + i;
  return std::nullopt;
}

std::string micro_batch_progress::report(int32_t stage, int32_t replica,
                                         int32_t pass) {
  if (pass != pass_forward && pass != pass_backward)
    return "unknown pass " + std::to_string(pass);
  auto at = index_of(stage, replica);
  if (!at)
    return "stage " + std::to_string(stage) + " has no replica "
           + std::to_string(replica) + " with rows of this micro-batch";
  auto& done = done_[*at];
  if (done & bit(pass))
    return std::string(pass_name(pass)) + " pass reported twice";
  // One replica's reports arrive in the order it sent them (CAF keeps the
  // order between two actors), and it runs a piece's forward pass first.
  if (pass == pass_backward && !(done & bit(pass_forward)))
    return "backward pass reported before the forward pass";
  done |= bit(pass);
  if (pass == pass_backward)
    --remaining_;
  ++reports_;
  return {};
}

bool micro_batch_progress::stage_done(size_t stage, int32_t pass) const {
  for (size_t i = 0; i < route_.stages[stage].size(); ++i)
    if (!(done_[first_piece_[stage] + i] & bit(pass)))
      return false;
  return true;
}

nlohmann::json micro_batch_progress::where() const {
  using nlohmann::json;
  const auto P = route_.stages.size();
  json forward = json::array(), backward = json::array();
  for (size_t s = 0; s < P; ++s) {
    if (stage_done(s, pass_forward))
      forward.push_back(s);
    if (stage_done(s, pass_backward))
      backward.push_back(s);
  }
  // The pass order of a micro-batch: forward through the stages, then
  // backward from the last one. The first stage in that order with a piece
  // still to finish is where it waits.
  json waiting = json::array();
  auto waiting_at = [&](size_t s, int32_t pass) {
    for (size_t i = 0; i < route_.stages[s].size(); ++i) {
      if (done_[first_piece_[s] + i] & bit(pass))
        continue;
      const auto& p = route_.stages[s][i];
      waiting.push_back({{"stage", s},
                         {"replica", p.replica},
                         {"device", p.device},
                         {"node", p.node},
                         {"rows", {p.begin, p.end}},
                         {"pass", pass_name(pass)}});
    }
    return !waiting.empty();
  };
  bool found = false;
  for (size_t s = 0; s < P && !found; ++s)
    found = waiting_at(s, pass_forward);
  for (size_t s = P; s-- > 0 && !found;)
    found = waiting_at(s, pass_backward);
  return {{"step", route_.step},
          {"micro_batch", route_.micro_batch},
          {"forward_done", forward},
          {"backward_done", backward},
          {"waiting", waiting},
          {"finished", finished()}};
}

} // namespace asteroid::actors
