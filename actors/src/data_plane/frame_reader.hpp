#pragma once
// Reads data-plane frames off one link, one after another, and hands them
// to the link's owner. The header is checked before anything is allocated;
// the payload is then read a piece at a time into a buffer whose address
// space is reserved up front (up to `reserved_at_most`) but whose pages are
// written, and so committed, only as pieces arrive: the memory a frame
// holds follows the bytes that actually arrived, never a header's word (a
// peer that claims 2 GiB and sends 10 bytes costs 64 KiB, not 2 GiB: the
// first piece is small and each one at most as large as what arrived
// before it), and a frame of realistic size is read into place without
// being copied as it grows. A payload too large to stay cached is read a
// little at a time into a small buffer that does, and written on from
// there around the cache (payload_bytes.hpp).
#include "link_stream.hpp"
#include "payload_bytes.hpp"

#include "asteroid/serialization/frame.hpp"

#include <algorithm>
#include <array>
#include <memory>
#include <string>

namespace asteroid::actors::detail {

/// The owner of a link that frames are read from. Called on the link's
/// strand; `from` tells which link, for an owner that replaces its link.
class frame_receiver {
public:
  virtual ~frame_receiver() = default;
  /// Some bytes arrived: the peer is alive.
  virtual void on_bytes(const link_stream& from) = 0;
  /// A header that decoded; false closes the link before the frame's key
  /// or payload is read.
  virtual bool on_header(const link_stream& from,
                         const serialization::frame_header& h) = 0;
  virtual void on_frame(const link_stream& from, serialization::frame_header h,
                        std::string key, std::string payload) = 0;
  /// Reading ended: the link closed or broke (`bad` false), or the peer sent
  /// a header that does not decode (`bad` true); `why` says which.
  virtual void on_end(const link_stream& from, const std::string& why, bool bad) = 0;
};

class frame_reader : public std::enable_shared_from_this<frame_reader> {
public:
  /// The most a payload grows by at once beyond what already arrived, and
  /// the most one read takes.
  static constexpr size_t piece = size_t{1} << 20;
  /// The first piece of a payload; each next one is as large as what
  /// arrived already (up to `piece`). The buffer is zero-filled, and so
  /// committed, a piece ahead of the bytes: 64 claims of 2 GiB that send
  /// nothing more hold 4 MiB, not the 64 MiB of 1 MiB pieces.
  static constexpr size_t first_piece = size_t{64} << 10;
  /// Address space reserved for a payload before its bytes arrive; a larger
  /// one is moved as it grows (doubling), as before.
  static constexpr size_t reserved_at_most = size_t{64} << 20;
  /// Payloads of at least this many bytes are written around the cache
  /// where the build can (payload_bytes.hpp): half the 8 MiB last-level
  /// cache of the hosts it was measured on. A smaller one is read into
  /// place, where it may still be cached when it is used.
  static constexpr size_t around_cache_from = size_t{4} << 20;
  /// The most such a payload's bytes are read at once before they are
  /// copied on: half a core's 512 KiB L2 on those hosts, so that the bytes
  /// are still there when they are copied.
  static constexpr size_t bounce_at_most = size_t{256} << 10;

  /// Reads until the link closes or the receiver refuses a header. Keeps
  /// the link alive while it reads; holds the receiver only weakly.
  static void start(std::shared_ptr<link_stream> link,
                    std::weak_ptr<frame_receiver> to,
                    serialization::frame_limits limits) {
    std::shared_ptr<frame_reader> r{
      new frame_reader(std::move(link), std::move(to), limits)};
    r->read_header();
  }

private:
  frame_reader(std::shared_ptr<link_stream> link, std::weak_ptr<frame_receiver> to,
               serialization::frame_limits limits)
    : link_(std::move(link)), to_(std::move(to)), limits_(limits) {}

  void read_header() {
    asio::async_read(*link_, asio::buffer(raw_),
                     [self = shared_from_this()](const asio::error_code& ec, size_t) {
                       self->on_header_bytes(ec);
                     });
  }

  void on_header_bytes(const asio::error_code& ec) {
    auto to = to_.lock();
    if (!to)
      return link_->close();
    if (ec)
      return to->on_end(*link_, ec.message(), false);
    to->on_bytes(*link_);
    try {
      header_ = serialization::decode_frame_header(raw_.data(), limits_);
    } catch (const serialization::wire_error& e) {
      return to->on_end(*link_, e.what(), true);
    }
    if (!to->on_header(*link_, header_)) {
      link_->close();
      return to->on_end(*link_, "frame refused", false);
    }
    key_.assign(header_.key_size, '\0');
    around_cache_ = header_.payload_size >= around_cache_from && can_write_around_cache();
    payload_.clear();
    payload_.reserve(static_cast<size_t>(
      std::min<uint64_t>(header_.payload_size, reserved_at_most)));
    have_ = 0;
    if (key_.empty())
      return read_payload();
    asio::async_read(*link_, asio::buffer(key_),
                     [self = shared_from_this()](const asio::error_code& ec, size_t) {
                       if (self->keep_reading(ec))
                         self->read_payload();
                     });
  }

  void read_payload() {
    if (have_ == header_.payload_size)
      return complete();
    if (have_ == payload_.size())
      grow(payload_, static_cast<size_t>(std::min<uint64_t>(
                       header_.payload_size,
                       have_ + std::clamp(have_, first_piece, piece))));
    // One piece per read: the owner hears of progress at least every
    // `piece` bytes (its watchdog).
    auto n = payload_.size() - have_;
    if (around_cache_)
      return read_around_cache(n);
    asio::async_read(*link_, asio::buffer(payload_.data() + have_, n), transfer_whole{},
                     [self = shared_from_this(), n](const asio::error_code& ec, size_t) {
                       if (!self->keep_reading(ec))
                         return;
                       self->have_ += n;
                       self->read_payload();
                     });
  }

  /// Up to `n` more bytes (one piece, or what is left of it) through the
  /// bounce buffer, which grows with the pieces (a peer that claims a large
  /// payload and sends nothing costs a first piece's worth, as above).
  void read_around_cache(size_t n) {
    auto k = std::min(n, bounce_at_most);
    if (bounce_.size() < k)
      bounce_.resize(k);
    asio::async_read(*link_, asio::buffer(bounce_.data(), k), transfer_whole{},
                     [self = shared_from_this(), k](const asio::error_code& ec, size_t) {
                       if (!self->keep_reading(ec))
                         return;
                       copy_around_cache(self->payload_.data() + self->have_,
                                         self->bounce_.data(), k);
                       self->have_ += k;
                       self->read_payload();
                     });
  }

  void complete() {
    auto to = to_.lock();
    if (!to)
      return link_->close();
    to->on_frame(*link_, header_, std::move(key_), std::move(payload_));
    key_.clear();
    payload_ = std::string();
    bounce_ = std::string();
    read_header();
  }

  /// After a read: false (and the receiver told) when the link ended.
  bool keep_reading(const asio::error_code& ec) {
    auto to = to_.lock();
    if (!to) {
      link_->close();
      return false;
    }
    if (ec) {
      to->on_end(*link_, ec.message(), false);
      return false;
    }
    to->on_bytes(*link_);
    return true;
  }

  /// `s` resized to `n` (only the new piece is written, and not even that
  /// when it is to be written around the cache); past its capacity into a
  /// buffer of twice the bytes that arrived, at most the payload.
  void grow(std::string& s, size_t n) const {
    if (n > s.capacity())
      s.reserve(static_cast<size_t>(
        std::min<uint64_t>(header_.payload_size, std::max(n, 2 * s.size()))));
    if (around_cache_)
      grow_unwritten(s, n);
    else
      s.resize(n);
  }

  std::shared_ptr<link_stream> link_;
  std::weak_ptr<frame_receiver> to_;
  serialization::frame_limits limits_;
  std::array<char, serialization::frame_header_size> raw_{};
  serialization::frame_header header_;
  std::string key_, payload_;
  size_t have_ = 0;
  bool around_cache_ = false;
  /// Where a payload written around the cache is read first.
  std::string bounce_;
};

} // namespace asteroid::actors::detail
