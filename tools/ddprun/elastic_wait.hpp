// How an elastic agent waits: by polling the store every 50 ms until a condition holds or a
// deadline passes, taking the user's signals between two looks; and how the job ends from the
// middle of a wait (job_ends, with the exit code and the message every agent prints).
#pragma once

#include <chrono>
#include <functional>
#include <stdexcept>
#include <string>

namespace ddprun {

using steady = std::chrono::steady_clock;

/// The job ends here with `code`; what() says why (printed as "ddprun: node N: <what>").
struct job_ends : std::runtime_error {
  job_ends(int c, const std::string& what) : std::runtime_error(what), code(c) {}
  int code;
};

/// Calls `done` every 50 ms until it returns true (then true) or `deadline` passes (false).
/// A user's SIGINT, SIGTERM or SIGQUIT ends the wait with job_ends (128 + signal).
bool poll_until(const std::function<bool()>& done, steady::time_point deadline);

/// Seconds as a duration of the steady clock.
steady::duration seconds(double s);

} // namespace ddprun
