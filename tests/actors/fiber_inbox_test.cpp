// The step driver's inbox (actors/src/fiber_inbox.hpp): code on a fiber that
// waits for messages inside an event-based actor.
#include "fiber_inbox.hpp"
#include "message_dispatch.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using namespace asteroid::actors::detail;
using clock_type = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

using ready_atom = caf::atom_constant<caf::atom("t_ready")>;
using finished_atom = caf::atom_constant<caf::atom("t_finished")>;
using ping_atom = caf::atom_constant<caf::atom("t_ping")>;
using pong_atom = caf::atom_constant<caf::atom("t_pong")>;

/// What a script gets: its actor, its inbox and the test's observer.
using script = std::function<void(caf::event_based_actor*, fiber_inbox&, const caf::actor&)>;

struct scripted_state {
  std::unique_ptr<fiber_inbox> inbox;
};

/// An actor whose fiber runs `run`, then tells `observer` it finished.
caf::behavior scripted(caf::stateful_actor<scripted_state>* self, script run,
                       caf::actor observer) {
  self->state.inbox = std::make_unique<fiber_inbox>(self, [self, run, observer] {
    run(self, *self->state.inbox, observer);
    self->send(observer, finished_atom::value);
    self->quit();
  });
  return self->state.inbox->behavior();
}

/// Runs `run` on a scripted actor; once the script sends the observer
/// `ready_atom`, `feed` is called with the observer and the actor; then
/// waits, bounded, for the script to finish.
void run_script(caf::actor_system& sys, script run,
                const std::function<void(caf::scoped_actor&, const caf::actor&)>& feed) {
  caf::scoped_actor observer{sys};
  auto a = sys.spawn(scripted, std::move(run), caf::actor{observer});
  bool ready = false;
  observer->receive([&](ready_atom) { ready = true; },
                    caf::after(std::chrono::seconds(10)) >> [] {});
  REQUIRE(ready);
  feed(observer, a);
  bool finished = false;
  observer->receive([&](finished_atom) { finished = true; },
                    caf::after(std::chrono::seconds(20)) >> [] {});
  REQUIRE(finished);
}

bool take_int(inbox_message& m, std::vector<int32_t>& out) {
  return dispatch(m.content, [&](int32_t x) { out.push_back(x); });
}

bool take_text(inbox_message& m, std::vector<std::string>& out) {
  return dispatch(m.content, [&](std::string& x) { out.push_back(std::move(x)); });
}

} // namespace

TEST_CASE("the step driver's inbox: a wait takes the first message it accepts, holds the "
          "others in order for later waits, and returns false once its deadline passed",
          "[fiber_inbox]") {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  std::vector<int32_t> ints;
  std::vector<std::string> texts;
  std::vector<bool> results;
  bool sender_seen = false;
  clock_type::duration last_wait{};
  run_script(
    sys,
    [&](caf::event_based_actor* self, fiber_inbox& inbox, const caf::actor& observer) {
      self->send(observer, ready_atom::value);
      const auto from = caf::actor_cast<caf::strong_actor_ptr>(observer);
      const auto deadline = clock_type::now() + std::chrono::seconds(10);
      results.push_back(inbox.receive_until(deadline, [&](inbox_message& m) {
        sender_seen = m.sender == from;
        return take_int(m, ints);
      }));
      // "a" and "b" came first and were declined: held, in order.
      CHECK(inbox.held() == 2);
      for (int i = 0; i < 2; ++i)
        results.push_back(
          inbox.receive_until(deadline, [&](inbox_message& m) { return take_text(m, texts); }));
      const auto t0 = clock_type::now();
      results.push_back(inbox.receive_until(
        t0 + milliseconds(50), [&](inbox_message& m) { return take_text(m, texts); }));
      last_wait = clock_type::now() - t0;
    },
    [&](caf::scoped_actor& observer, const caf::actor& a) {
      observer->send(a, std::string("a"));
      observer->send(a, std::string("b"));
      observer->send(a, int32_t{1});
    });
  CHECK(results == std::vector<bool>{true, true, true, false});
  CHECK(ints == std::vector<int32_t>{1});
  CHECK(texts == std::vector<std::string>{"a", "b"});
  CHECK(sender_seen);
  CHECK(last_wait >= milliseconds(50));
}

TEST_CASE("the step driver's inbox: a blocking call runs on a thread of its own, what it "
          "throws comes back, and a message that arrived meanwhile is held for later",
          "[fiber_inbox]") {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  std::thread::id fiber_thread, aside_thread;
  std::string thrown;
  std::vector<int32_t> ints;
  bool taken = false;
  run_script(
    sys,
    [&](caf::event_based_actor* self, fiber_inbox& inbox, const caf::actor& observer) {
      self->send(observer, ready_atom::value);
      auto me = caf::actor_cast<caf::actor>(self);
      fiber_thread = std::this_thread::get_id();
      inbox.run_aside([&] {
        aside_thread = std::this_thread::get_id();
        caf::anon_send(me, int32_t{7});
        std::this_thread::sleep_for(milliseconds(50));
      });
      try {
        inbox.run_aside([] { throw std::runtime_error("no such node"); });
      } catch (const std::runtime_error& e) {
        thrown = e.what();
      }
      // Already in the inbox: taken without waiting.
      taken = inbox.receive_until(clock_type::now(),
                                  [&](inbox_message& m) { return take_int(m, ints); });
    },
    [](caf::scoped_actor&, const caf::actor&) {});
  CHECK(aside_thread != std::thread::id{});
  CHECK(aside_thread != fiber_thread);
  CHECK(thrown == "no such node");
  CHECK(taken);
  CHECK(ints == std::vector<int32_t>{7});
}

TEST_CASE("the step driver's inbox: messages that came while the fiber ran wait in the "
          "mailbox until it waits, and sync brings every one of them in",
          "[fiber_inbox]") {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  size_t held_before = 99, held_after = 0;
  std::vector<int32_t> ints;
  std::atomic<bool> sent{false};
  run_script(
    sys,
    [&](caf::event_based_actor* self, fiber_inbox& inbox, const caf::actor& observer) {
      // The test sends three messages on "ready"; the fiber keeps running
      // (it holds its actor) until they are queued (bounded).
      self->send(observer, ready_atom::value);
      const auto give_up = clock_type::now() + std::chrono::seconds(10);
      while (!sent && clock_type::now() < give_up)
        std::this_thread::sleep_for(milliseconds(1));
      held_before = inbox.held();
      inbox.sync();
      held_after = inbox.held();
      while (inbox.receive_until(clock_type::now(),
                                 [&](inbox_message& m) { return take_int(m, ints); }))
        ;
    },
    [&](caf::scoped_actor& observer, const caf::actor& a) {
      for (int32_t i = 1; i <= 3; ++i)
        observer->send(a, i); // in the local actor's mailbox on return
      sent = true;
    });
  CHECK(held_before == 0);
  CHECK(held_after == 3);
  CHECK(ints == std::vector<int32_t>{1, 2, 3});
}

TEST_CASE("dispatch offers a message to the first handler whose types match, atoms by value",
          "[fiber_inbox]") {
  using a_atom = caf::atom_constant<caf::atom("t_a")>;
  using b_atom = caf::atom_constant<caf::atom("t_b")>;
  std::vector<std::string> seen;
  auto offer = [&](caf::message m) {
    return dispatch(
      m, [&](a_atom, int64_t x) { seen.push_back("a " + std::to_string(x)); },
      [&](b_atom, int64_t x) { seen.push_back("b " + std::to_string(x)); },
      [&](std::string& s) { seen.push_back("text " + s); });
  };
  CHECK(offer(caf::make_message(b_atom::value, int64_t{2})));
  CHECK(offer(caf::make_message(a_atom::value, int64_t{1})));
  CHECK(offer(caf::make_message(std::string("x"))));
  CHECK_FALSE(offer(caf::make_message(a_atom::value, int32_t{1})));
  CHECK_FALSE(offer(caf::make_message(caf::atom("t_c"), int64_t{3})));
  CHECK(seen == std::vector<std::string>{"b 2", "a 1", "text x"});
}
