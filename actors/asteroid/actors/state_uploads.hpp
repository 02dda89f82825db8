#pragma once
/// \file
/// Stage states a node receives in pieces before the deployment that uses
/// them (`ast_upload`, then `ast_deploy` naming the upload).
///
/// Why pieces: a stage state is tens to hundreds of MiB (ResNet-50's layers
/// 9-18: 79 MiB of weights, twice that with momentum), and CAF sends one
/// message on a connection before the next. As one message it held the
/// supervisor's heartbeats to that node behind it for as long as it took
/// to cross the link (6.6 s for those weights at 100 Mbit/s), and the node
/// was counted lost while it was being deployed.
/// Sent as pieces of at most `state_piece_bytes`, each after the last was
/// answered, a heartbeat waits behind one piece at most.
///
/// What a peer can make a node hold is bounded: an upload names its total
/// size up front, which must fit what is left of `max_bytes` (the node's
/// memory budget); pieces must come in order and fit that size; at most
/// `max_uploads` are open at once (a new one beyond that drops the oldest,
/// which a deployment given up midway leaves behind). Bytes are counted as
/// pieces arrive, never on the word of the announced size. An upload's
/// announced size is reserved up front (address space: its pages are
/// touched as pieces fill them) while the open uploads' reservations stay
/// within `max_bytes`; one beyond that grows as its pieces arrive.
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>

namespace asteroid::actors {

/// The largest piece of a stage state in one message between processes
/// (an upload's piece, a snapshot read's piece). At 100 Mbit/s one piece
/// holds a heartbeat back by 84 ms.
inline constexpr int64_t state_piece_bytes = int64_t{1} << 20;

/// Reads a state of unknown size piece by piece: `next(offset)` returns the
/// piece at `offset` and the state's total size, until the pieces add up to
/// it. Throws std::runtime_error naming `what` when they do not (an empty
/// piece, a total that changes, a piece past the end). A first answer of
/// nothing and a total of 0 is an empty state.
std::string read_in_pieces(const std::function<std::pair<std::string, int64_t>(int64_t)>& next,
                           const std::string& what);

/// The piece of `bytes` at `offset` (at most `state_piece_bytes`; empty
/// when the offset is outside) and whether it is the last.
std::pair<std::string, bool> piece_at(const std::string& bytes, int64_t offset);

class state_uploads {
public:
  /// Who sent it (the uploading actor's id in its process; uploads come
  /// from the one process that holds the node) and its number there.
  using key = std::pair<uint64_t, int64_t>;

  explicit state_uploads(uint64_t max_bytes, size_t max_uploads = 64)
    : max_bytes_(max_bytes), max_uploads_(max_uploads) {}

  /// Appends `piece` at `offset` to upload `k` of `total` bytes (offset 0
  /// opens it). Returns "" or why it was refused; a refused upload is
  /// dropped, so its sender starts again or gives up.
  std::string append(const key& k, int64_t total, int64_t offset, std::string piece);

  /// The bytes of complete upload `k`, which is then forgotten; nullopt
  /// and `why` when there is none or it is incomplete.
  std::optional<std::string> take(const key& k, std::string& why);

  /// Forgets every upload (the node is released or claimed by another job).
  void clear();

  /// Bytes held by open uploads.
  uint64_t bytes() const { return held_; }
  /// Bytes reserved up front for open uploads (at most `max_bytes`).
  uint64_t reserved() const { return reserved_; }
  size_t count() const { return uploads_.size(); }

private:
  struct upload {
    int64_t total = 0;
    std::string bytes;
    uint64_t opened = 0; ///< order of opening: the oldest goes first
    uint64_t reserved = 0; ///< reserved up front for it
  };
  void drop(std::map<key, upload>::iterator it);

  uint64_t max_bytes_;
  size_t max_uploads_;
  uint64_t held_ = 0;
  uint64_t reserved_ = 0;
  uint64_t opened_ = 0;
  std::map<key, upload> uploads_;
};

} // namespace asteroid::actors
