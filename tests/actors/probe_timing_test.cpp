// How a link probe tells the answer to its echo (actors/src/probe_timing.hpp):
// a peer answers an echo written again after a broken connection once more,
// and that second answer must not be taken for the next echo's.
#include "probe_timing.hpp"

#include <catch2/catch.hpp>

using namespace asteroid;
using serialization::tensor_kind;
using serialization::tensor_message;

namespace {

tensor_message reply_tagged(int64_t tag) {
  tensor_message m;
  m.kind = tensor_kind::echo_reply;
  m.generation = tag;
  return m;
}

} // namespace

TEST_CASE("probe timing: an echo's answer is the reply with its tag") {
  CHECK(actors::detail::answers_echo(reply_tagged(3), 3));
  // The answer to the echo before, arriving late or twice.
  CHECK_FALSE(actors::detail::answers_echo(reply_tagged(2), 3));
  // A node older than tags answers with none.
  CHECK(actors::detail::answers_echo(reply_tagged(0), 3));
  auto not_a_reply = reply_tagged(3);
  not_a_reply.kind = tensor_kind::echo;
  CHECK_FALSE(actors::detail::answers_echo(not_a_reply, 3));
}
