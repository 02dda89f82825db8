#pragma once
// Sends a stage state to a node's device actor as an upload in pieces
// (`ast_upload`, state_uploads.hpp), one piece after the last was answered,
// for the event-based actors that deploy: stage actors (training) and the
// inference server.
#include "asteroid/actors/protocol.hpp"
#include "asteroid/actors/state_uploads.hpp"

#include <chrono>
#include <functional>
#include <memory>
#include <string>

namespace asteroid::actors::detail {

/// Sends `bytes` from `offset` on as upload `id` to `device`, each piece
/// within `timeout`. Before each piece after the first, `wanted()` may say
/// the deployment was given up: then nothing more is sent and `done` is not
/// called. Otherwise `done("")` once the last piece is taken, or
/// `done(why)` at the first refusal or error.
template <class Self>
void upload_in_pieces(Self self, device_actor device,
                      std::shared_ptr<const std::string> bytes, int64_t id,
                      std::chrono::milliseconds timeout, std::function<bool()> wanted,
                      std::function<void(const std::string&)> done, int64_t offset = 0) {
  const auto total = static_cast<int64_t>(bytes->size());
  const auto n = std::min(state_piece_bytes, total - offset);
  self
    ->request(device, timeout, upload_atom::value, id, total, offset,
              bytes->substr(static_cast<size_t>(offset), static_cast<size_t>(n)))
    .then(
      [=](std::string& err) {
        if (!wanted())
          return;
        if (!err.empty() || offset + n == total)
          return done(err);
        upload_in_pieces(self, device, bytes, id, timeout, wanted, done, offset + n);
      },
      [=](caf::error& e) {
        if (wanted())
          done(self->system().render(e));
      });
}

} // namespace asteroid::actors::detail
