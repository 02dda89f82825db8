#include "fiber_inbox.hpp"

#include <spdlog/spdlog.h>

#include <boost/context/protected_fixedsize_stack.hpp>

#include <atomic>
#include <cstdlib>
#include <exception>
#include <utility>

namespace asteroid::actors::detail {

namespace {

using inbox_wake_atom = caf::atom_constant<caf::atom("ast_iwake")>;
using inbox_sync_atom = caf::atom_constant<caf::atom("ast_isync")>;
using inbox_aside_atom = caf::atom_constant<caf::atom("ast_iaside")>;
using inbox_start_atom = caf::atom_constant<caf::atom("ast_istart")>;

/// What run_aside's helper shares with the fiber.
struct aside_work {
  std::function<void()> work;
  std::exception_ptr error;
  std::atomic<bool> done{false};
};

/// As much as a thread's default stack: the driver plans, builds and
/// evaluates models on it. Mapped, not touched: pages are taken as used;
/// a guard page below turns an overflow into a fault.
constexpr size_t fiber_stack_bytes = size_t{8} << 20;

/// Holds the driver only weakly: passes a wake-up on while it lives.
caf::behavior wake_relay(caf::event_based_actor* relay, caf::actor_addr driver) {
  return {
    [relay, driver](inbox_wake_atom) {
      if (auto to = caf::actor_cast<caf::actor>(driver))
        relay->send(to, inbox_wake_atom::value);
    },
  };
}

} // namespace

fiber_inbox::fiber_inbox(caf::event_based_actor* self, std::function<void()> body)
  : self_(self),
    wake_relay_(self->spawn(wake_relay, caf::actor_cast<caf::actor_addr>(self))),
    body_(std::move(body)) {
}

fiber_inbox::~fiber_inbox() {
  caf::anon_send_exit(wake_relay_, caf::exit_reason::user_shutdown);
  if (fiber_) {
    // Only an actor killed while its driver waits gets here (the driver
    // traps exit messages). Unwinding the fiber would run the driver's
    // cleanup, which sends and waits, after its actor is gone: its stack is
    // left mapped instead.
    spdlog::error("the step driver's actor went away while the driver "
                  "waited; its fiber is left as it is");
    new boost::context::fiber(std::move(fiber_));
  }
}

caf::behavior fiber_inbox::behavior() {
  self_->set_default_handler(
    [this](caf::scheduled_actor* s, caf::message_view& x) -> caf::result<caf::message> {
      deliver(s->current_sender(), x.move_content_to_message());
      return caf::message{};
    });
  self_->set_down_handler(
    [this](caf::down_msg& dm) { deliver(nullptr, caf::make_message(std::move(dm))); });
  self_->set_error_handler([this](caf::error& e) {
    deliver(self_->current_sender(), caf::make_message(std::move(e)));
  });
  self_->send(self_, inbox_start_atom::value);
  return {
    [this](inbox_start_atom) { start(); },
  };
}

void fiber_inbox::start() {
  if (fiber_ || finished_ || running_)
    return;
  fiber_ = boost::context::fiber{
    std::allocator_arg, boost::context::protected_fixedsize_stack(fiber_stack_bytes),
    [this](boost::context::fiber&& actor) {
      actor_side_ = std::move(actor);
      body_();
      finished_ = true;
      return std::move(actor_side_);
    }};
  running_ = true;
  fiber_ = std::move(fiber_).resume();
  running_ = false;
}

void fiber_inbox::deliver(caf::strong_actor_ptr sender, caf::message content) {
  if (finished_)
    return;
  fresh_.push_back({std::move(sender), std::move(content)});
  poke();
}

void fiber_inbox::poke() {
  if (running_ || !fiber_)
    return;
  running_ = true;
  fiber_ = std::move(fiber_).resume();
  running_ = false;
}

void fiber_inbox::suspend() {
  // The fiber may go on on another of the scheduler's threads, and the
  // exception being handled or thrown lives in the thread's own state:
  // waiting inside a catch block, or while unwinding, would end it on a
  // thread that knows nothing of it. A programming error, stopped here.
  if (std::current_exception() || std::uncaught_exceptions() > 0) {
    spdlog::critical("the step driver waited while an exception was being handled");
    std::abort();
  }
  actor_side_ = std::move(actor_side_).resume();
}

void fiber_inbox::wake_by(clock::time_point when) {
  auto now = clock::now();
  if (wake_at_ > now && wake_at_ <= when)
    return;
  // Anonymous: a delayed message holds its sender as well as its receiver.
  caf::delayed_anon_send(wake_relay_, std::max(when - now, clock::duration::zero()),
                         inbox_wake_atom::value);
  wake_at_ = when;
}

bool fiber_inbox::is_own(const inbox_message& m) {
  if (m.sender == caf::actor_cast<caf::strong_actor_ptr>(wake_relay_))
    return m.content.match_elements<inbox_wake_atom>();
  if (m.sender != caf::actor_cast<caf::strong_actor_ptr>(self_))
    return m.content.match_elements<inbox_aside_atom>();
  if (m.content.match_elements<inbox_sync_atom, int64_t>()) {
    sync_arrived_ = std::max(sync_arrived_, m.content.get_as<int64_t>(1));
    return true;
  }
  return false;
}

void fiber_inbox::run_aside(std::function<void()> work) {
  auto box = std::make_shared<aside_work>();
  box->work = std::move(work);
  self_->spawn<caf::detached>(
    [box, me = caf::actor_cast<caf::actor>(self_)](caf::blocking_actor* helper) {
      try {
        box->work();
      } catch (...) {
        box->error = std::current_exception();
      }
      box->done = true;
      helper->send(me, inbox_aside_atom::value);
    });
  wait_until(clock::time_point::max(), [&] { return box->done.load(); });
  if (box->error)
    std::rethrow_exception(box->error);
}

void fiber_inbox::sync() {
  const int64_t marker = ++sync_sent_;
  self_->send(self_, inbox_sync_atom::value, marker);
  // The marker is queued behind whatever the mailbox holds, so it comes
  // back after it; bounded all the same.
  wait_until(clock::now() + std::chrono::seconds(10),
             [&] { return sync_arrived_ >= marker; });
}

bool fiber_inbox::receive_until(clock::time_point deadline, const take_fn& take) {
  // Held messages first, oldest first; the declined ones keep their order
  // ahead of any not yet looked at.
  for (size_t n = held_.size(), k = 0; k < n && !held_.empty(); ++k) {
    auto m = std::move(held_.front());
    held_.pop_front();
    if (take(m)) {
      for (size_t rest = k + 1; rest < n && !held_.empty(); ++rest) {
        held_.push_back(std::move(held_.front()));
        held_.pop_front();
      }
      return true;
    }
    held_.push_back(std::move(m));
  }
  for (;;) {
    while (!fresh_.empty()) {
      auto m = std::move(fresh_.front());
      fresh_.pop_front();
      if (is_own(m))
        continue;
      if (take(m))
        return true;
      held_.push_back(std::move(m));
    }
    if (clock::now() >= deadline)
      return false;
    wake_by(deadline);
    suspend();
  }
}

bool fiber_inbox::wait_until(clock::time_point deadline,
                             const std::function<bool()>& done) {
  for (;;) {
    while (!fresh_.empty()) {
      if (!is_own(fresh_.front()))
        held_.push_back(std::move(fresh_.front()));
      fresh_.pop_front();
    }
    if (done())
      return true;
    if (clock::now() >= deadline)
      return false;
    if (deadline != clock::time_point::max())
      wake_by(deadline);
    suspend();
  }
}

void fiber_inbox::pause(clock::duration d) {
  wait_until(clock::now() + d, [] { return false; });
}

} // namespace asteroid::actors::detail
