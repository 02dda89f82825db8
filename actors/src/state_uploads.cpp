#include "asteroid/actors/state_uploads.hpp"

#include "asteroid/planner/json_io.hpp"

#include <algorithm>
#include <new>
#include <stdexcept>

namespace asteroid::actors {

std::string read_in_pieces(const std::function<std::pair<std::string, int64_t>(int64_t)>& next,
                           const std::string& what) {
  std::string bytes;
  for (int64_t total = -1; total < 0 || static_cast<int64_t>(bytes.size()) < total;) {
    auto [piece, size] = next(static_cast<int64_t>(bytes.size()));
    if (total < 0 && size == 0 && piece.empty())
      return bytes;
    if ((total >= 0 && size != total) || piece.empty()
        || static_cast<int64_t>(bytes.size() + piece.size()) > size)
      throw std::runtime_error(what + ": " + std::to_string(piece.size())
                               + " bytes came at offset " + std::to_string(bytes.size())
                               + " of a state of " + std::to_string(size));
    total = size;
    bytes += piece;
  }
  return bytes;
}

std::pair<std::string, bool> piece_at(const std::string& bytes, int64_t offset) {
  const auto total = static_cast<int64_t>(bytes.size());
  if (offset < 0 || offset >= total)
    return {std::string{}, true};
  const auto n = std::min(state_piece_bytes, total - offset);
  return {bytes.substr(static_cast<size_t>(offset), static_cast<size_t>(n)),
          offset + n == total};
}

std::string state_uploads::append(const key& k, int64_t total, int64_t offset,
                                  std::string piece) {
  auto it = uploads_.find(k);
  auto refuse = [&](std::string why) {
    if (it != uploads_.end())
      drop(it);
    return why;
  };
  if (piece.empty() || static_cast<int64_t>(piece.size()) > state_piece_bytes)
    return refuse("a piece of " + std::to_string(piece.size())
                  + " bytes (1 to " + std::to_string(state_piece_bytes) + ")");
  if (offset == 0) {
    if (it != uploads_.end())
      drop(it); // the sender starts again
    it = uploads_.end();
    if (total < 1)
      return "an upload of " + std::to_string(total) + " bytes";
    // What other uploads hold plus this one's whole size: a sender that
    // announces more than the budget leaves is refused before it sends it.
    if (static_cast<uint64_t>(total) > max_bytes_ - std::min(held_, max_bytes_))
      return "a stage state of " + planner::format_bytes(total)
             + ": more than its memory budget of "
             + planner::format_bytes(static_cast<int64_t>(max_bytes_)) + " leaves ("
             + planner::format_bytes(static_cast<int64_t>(held_))
             + " held for other deployments)";
    while (uploads_.size() >= max_uploads_ && !uploads_.empty())
      drop(std::min_element(uploads_.begin(), uploads_.end(), [](auto& a, auto& b) {
        return a.second.opened < b.second.opened;
      }));
    it = uploads_.emplace(k, upload{total, {}, ++opened_}).first;
    // Room for the whole state at once: grown by doubling, the last growth
    // of a 1.2 GB state (ViT-L/16's weights) copied 1 GiB into fresh pages
    // while the device actor could answer nothing (2.6 s here, and its
    // heartbeats went unanswered). Only while the reservations fit the
    // budget, so that announcements alone cannot claim more address space
    // than it; a reservation the system refuses leaves the upload to grow.
    if (reserved_ + static_cast<uint64_t>(total) <= max_bytes_) {
      try {
        it->second.bytes.reserve(static_cast<size_t>(total));
        it->second.reserved = static_cast<uint64_t>(total);
        reserved_ += it->second.reserved;
      } catch (const std::bad_alloc&) {
      }
    }
  } else if (it == uploads_.end()) {
    return "a piece at offset " + std::to_string(offset) + " of an upload that is not open";
  }
  auto& u = it->second;
  if (total != u.total)
    return refuse("a piece for " + std::to_string(total) + " bytes of an upload of "
                  + std::to_string(u.total));
  if (offset != static_cast<int64_t>(u.bytes.size()))
    return refuse("a piece at offset " + std::to_string(offset) + " where "
                  + std::to_string(u.bytes.size()) + " bytes have arrived");
  if (static_cast<int64_t>(piece.size()) > u.total - offset)
    return refuse("a piece that ends past the upload's " + std::to_string(u.total)
                  + " bytes");
  if (held_ + piece.size() > max_bytes_)
    return refuse("a piece past the node's " + std::to_string(max_bytes_)
                  + " bytes for uploads (" + std::to_string(held_) + " held)");
  u.bytes += piece;
  held_ += piece.size();
  return {};
}

std::optional<std::string> state_uploads::take(const key& k, std::string& why) {
  auto it = uploads_.find(k);
  if (it == uploads_.end()) {
    why = "no upload " + std::to_string(k.second) + " from this sender";
    return std::nullopt;
  }
  if (static_cast<int64_t>(it->second.bytes.size()) != it->second.total) {
    why = "upload " + std::to_string(k.second) + " has "
          + std::to_string(it->second.bytes.size()) + " of its "
          + std::to_string(it->second.total) + " bytes";
    return std::nullopt;
  }
  auto bytes = std::move(it->second.bytes);
  held_ -= bytes.size();
  reserved_ -= it->second.reserved;
  uploads_.erase(it);
  return bytes;
}

void state_uploads::clear() {
  uploads_.clear();
  held_ = 0;
  reserved_ = 0;
}

void state_uploads::drop(std::map<key, upload>::iterator it) {
  held_ -= it->second.bytes.size();
  reserved_ -= it->second.reserved;
  uploads_.erase(it);
}

} // namespace asteroid::actors
