#pragma once
/// \file
/// The step driver's inbox: lets code that reads as one sequence (plan,
/// deploy, run the steps, recover) wait for messages inside an event-based
/// actor, without a blocking receive.
///
/// The driver's code runs on a fiber (Boost.Context) that the actor owns.
/// Where it waits (receive_until, wait_until, pause) the fiber hands control
/// back to the actor, which returns to CAF's event loop; each message CAF
/// then gives the actor (deliver) or a response handler's poke resumes the
/// fiber, which looks at what arrived and either goes on or waits again. So
/// the actor answers its mailbox like any event-based actor, and the
/// driver's waits stay where the logic needs them instead of being cut into
/// continuation handlers.
///
/// Messages a wait declines are held, in order, and offered to every later
/// wait first: the semantics of a skipped message in a blocking receive.
///
/// The actor runs on CAF's scheduler, so the fiber may go on on another
/// thread after a wait. Code on it must not wait inside a catch block or
/// while unwinding (the exception's state is the thread's; suspend() stops
/// the program when it does), nor hold a thread-local setting (LibTorch's
/// grad mode guards, say) across a wait.
#include <caf/all.hpp>

#include <boost/context/fiber.hpp>

#include <chrono>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>

namespace asteroid::actors::detail {

/// One message the actor handed to the fiber.
struct inbox_message {
  caf::strong_actor_ptr sender;
  caf::message content;
};

class fiber_inbox {
public:
  using clock = std::chrono::steady_clock;
  /// Returns true when it takes the message; false leaves it for a later
  /// wait.
  using take_fn = std::function<bool(inbox_message&)>;

  /// `self` is the actor that owns the fiber and delivers to it; `body`
  /// runs on the fiber and must not throw.
  fiber_inbox(caf::event_based_actor* self, std::function<void()> body);
  /// A fiber still waiting is left unfreed (logged): unwinding it would run
  /// the driver's cleanup, which waits, while its actor goes away. Only a
  /// killed actor leaves one (the driver traps exit messages).
  ~fiber_inbox();

  fiber_inbox(const fiber_inbox&) = delete;
  fiber_inbox& operator=(const fiber_inbox&) = delete;

  // -- the actor's side --

  /// The owning actor's behavior: routes every message, down and error
  /// messages included, to deliver(), and starts the fiber with the first
  /// message the actor handles (one it sends itself here).
  caf::behavior behavior();
  /// Runs the fiber until it first waits (or ends).
  void start();
  /// A message for the fiber; resumes it when it waits.
  void deliver(caf::strong_actor_ptr sender, caf::message content);
  /// Resumes a waiting fiber to look again at what it waits for (a response
  /// handler set something it checks).
  void poke();

  // -- the fiber's side --

  /// Offers every held message, then each that arrives, to `take` until it
  /// takes one (true) or `deadline` passes (false). The inbox's own wake-ups
  /// are never offered.
  bool receive_until(clock::time_point deadline, const take_fn& take);
  /// Waits until `done()` holds or `deadline` passes (what done() says
  /// then); messages arriving meanwhile are held for later waits.
  bool wait_until(clock::time_point deadline, const std::function<bool()>& done);
  /// Waits `d`, holding what arrives.
  void pause(clock::duration d);
  /// Runs `work`, a call that blocks its thread (connecting to a node,
  /// measuring links or a profile on one), on a helper actor with a thread
  /// of its own, and waits for it to return, holding what arrives meanwhile;
  /// rethrows what it throws. Unbounded here: each such call is bounded by
  /// its own timeouts, and waiting for it to end keeps what it refers to
  /// alive.
  void run_aside(std::function<void()> work);
  /// Waits until every message the actor's mailbox held when called is in
  /// the inbox: messages that arrive while the fiber runs wait in the
  /// mailbox until it waits. For a look at "everything reported so far".
  void sync();
  /// Messages held for later waits, and not yet looked at.
  size_t held() const { return held_.size() + fresh_.size(); }

private:
  /// Hands control back to the actor until deliver() or poke().
  void suspend();
  /// Makes a wake-up arrive by `when`, unless one already comes by then.
  void wake_by(clock::time_point when);
  /// Whether `m` is the inbox's own (a wake-up or a sync marker): never
  /// offered, never held.
  bool is_own(const inbox_message& m);

  caf::event_based_actor* self_;
  /// Passes wake-ups on to the actor (wake_relay in the .cpp): a delayed
  /// message holds its receiver (and sender) until it fires, and one that
  /// held the actor would keep a detached actor's thread, and so its actor
  /// system, waiting up to the longest wait after the driver ended.
  caf::actor wake_relay_;
  std::function<void()> body_;
  boost::context::fiber fiber_;      ///< the driver, while it waits
  boost::context::fiber actor_side_; ///< the actor, while the driver runs
  bool running_ = false;             ///< the fiber has control
  bool finished_ = false;
  std::deque<inbox_message> fresh_; ///< arrived, not yet offered
  std::deque<inbox_message> held_;  ///< offered and declined, in order
  clock::time_point wake_at_{};
  int64_t sync_sent_ = 0;     ///< sync markers sent to the actor itself
  int64_t sync_arrived_ = 0;  ///< the newest of them that came back
};

} // namespace asteroid::actors::detail
