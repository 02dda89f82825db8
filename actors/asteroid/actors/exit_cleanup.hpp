#pragma once
/// \file
/// Paths a process removes even when it quits at once from a signal handler.
///
/// Why: a second Ctrl-C ends `asteroid cluster --job` with `_exit` from the
/// handler (the user asked for "now"), where no destructor runs and only
/// async-signal-safe calls are allowed. The throw-away credentials and the
/// log folder a local cluster made would stay in the temp folder. What is
/// registered here is removed by `remove_registered_paths()`, which only
/// reads fixed slots and calls unlink / rmdir.

#include <string>

namespace asteroid::actors {

/// Remembers `path` (a file, or an empty folder once what is registered
/// after it is gone) for `remove_registered_paths()`; returns a ticket for
/// `forget_path`, or -1 when every slot is taken (the path then stays, as
/// it would without this). Paths are removed newest first: register a
/// folder before what it holds.
int remember_path_for_exit(const std::string& path);

/// Withdraws a ticket (the owner removed the path itself); -1 is ignored.
void forget_path(int ticket);

/// Unlinks every registered file and removes every registered folder that
/// is empty by then (a few passes, newest first). Async-signal-safe: call it from a
/// handler just before `_exit`.
void remove_registered_paths() noexcept;

} // namespace asteroid::actors
