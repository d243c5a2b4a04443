#include "first_failure.hpp"

#include <ddp/error.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <sys/wait.h>

namespace ddprun {
namespace {

/// "signal 9 (SIGKILL)", without the name where the C library knows none.
std::string signal_words(int sig) {
  const char* name = ::sigabbrev_np(sig);
  return "signal " + std::to_string(sig) + (name ? std::string(" (SIG") + name + ")" : "");
}

} // namespace

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string describe(int status) {
  if (WIFEXITED(status) && WEXITSTATUS(status) == ddp::uncaught_error_exit_code)
    return "exited with code " + std::to_string(WEXITSTATUS(status)) + " (an uncaught ddp::error)";
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "was killed by " + signal_words(WTERMSIG(status));
  return "stopped";
}

std::string describe_stop(int sig) { return "was stopped by " + signal_words(sig); }

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

bool job_failed(const std::vector<failure>& failures) {
  return std::any_of(failures.begin(), failures.end(),
                     [](const failure& f) { return !f.from_note && f.what.rfind("was stopped", 0) != 0; });
}

const failure& first_failure(const std::vector<failure>& failures) {
  return *std::min_element(failures.begin(), failures.end(), [](const failure& a, const failure& b) {
    return a.ns != b.ns ? a.ns < b.ns : a.prio < b.prio;
  });
}

} // namespace ddprun
