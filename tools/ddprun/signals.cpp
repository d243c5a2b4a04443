#include "signals.hpp"

#include <csignal>
#include <fcntl.h>
#include <unistd.h>

namespace ddprun {
namespace {

int signal_pipe[2] = {-1, -1};

extern "C" void on_signal(int sig) {
  unsigned char s = static_cast<unsigned char>(sig);
  [[maybe_unused]] auto r = ::write(signal_pipe[1], &s, 1);
}

} // namespace

bool catch_user_signals() {
  if (::pipe2(signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) return false;
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  // SIGQUIT too (Ctrl-\, `timeout -s QUIT`): the ranks get it, and under --crash-report print
  // every thread's frames; ddprun stays to pass their output on, then names the signal.
  ::sigaction(SIGQUIT, &sa, nullptr);
  return true;
}

int user_signal_fd() { return signal_pipe[0]; }

std::optional<int> take_user_signal() {
  unsigned char sig;
  if (::read(signal_pipe[0], &sig, 1) == 1) return sig;
  return std::nullopt;
}

void restore_default_signals() {
  ::signal(SIGINT, SIG_DFL);
  ::signal(SIGTERM, SIG_DFL);
  ::signal(SIGQUIT, SIG_DFL);
}

} // namespace ddprun
