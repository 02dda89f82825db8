#pragma once
// What a node's actors do with a message that matches none of their
// handlers: log it and keep serving. A request gets an error reply; an
// asynchronous message gets none, because CAF delivers that error to the
// sender as a message, and an actor that did not expect it (a replica whose
// peer dropped its message) would quit on it.
#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <string>

namespace asteroid::actors::detail {

/// Installs the log-and-drop default handler and an error handler that logs
/// instead of quitting, so that no peer can stop `self` with a stray error.
inline void drop_unexpected(caf::scheduled_actor* self, std::string who) {
  self->set_default_handler(
    [who](caf::scheduled_actor* s, caf::message_view& x) -> caf::result<caf::message> {
      spdlog::error("{}: ignored unexpected message {}", who,
                    caf::to_string(x.content()));
      auto* element = s->current_mailbox_element();
      if (element != nullptr && element->mid.is_request())
        return caf::sec::unexpected_message;
      return caf::message{};
    });
  self->set_error_handler([who](caf::scheduled_actor*, caf::error& err) {
    spdlog::error("{}: ignored error message {}", who, caf::to_string(err));
  });
}

} // namespace asteroid::actors::detail
