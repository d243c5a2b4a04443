// The signals a user sends ddprun (SIGINT, SIGTERM, SIGQUIT): caught into a pipe, so the watch
// loop sees them between two polls and forwards them to every rank.
#pragma once

#include <optional>

namespace ddprun {

/// Catches the three signals from now on. False when the pipe cannot be made.
bool catch_user_signals();

/// The read end of the pipe, for poll().
int user_signal_fd();

/// The next signal caught and not yet taken, if any; never blocks.
std::optional<int> take_user_signal();

/// In a forked rank before exec: the three signals act as they would have without ddprun.
/// Async-signal-safe.
void restore_default_signals();

} // namespace ddprun
