#include "rank_processes.hpp"

#include "rank_environment.hpp"
#include "signals.hpp"

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

namespace ddprun {
namespace {

/// Pointers into `words` ending in a null pointer, as exec wants them.
std::vector<char*> exec_list(std::vector<std::string>& words) {
  std::vector<char*> list;
  for (auto& w : words)
    list.push_back(w.data());
  list.push_back(nullptr);
  return list;
}

/// The signal a rank gets when ddprun dies without stopping it (SIGKILL, the OOM killer): SIGTERM,
/// as a scheduler's preemption sends, so a handler can still save; the default ends the rank.
constexpr int launcher_death_signal = SIGTERM;

/// In the forked child: only async-signal-safe calls from here on (see rank_environment.hpp).
/// `launcher`: ddprun's pid, read before the fork.
[[noreturn]] void become_rank(char* const* args, char* const* envp, const std::string& cannot, int out,
                              int err, pid_t launcher) {
  restore_default_signals();
  // The parent-death signal survives exec (not into a set-user-ID program); it fires when the
  // thread that forked exits, which is ddprun's main thread, at ddprun's end. A launcher that
  // died before this line is not seen by it: the parent is then another process already.
  ::prctl(PR_SET_PDEATHSIG, launcher_death_signal);
  if (::getppid() != launcher) {
    ::kill(::getpid(), launcher_death_signal);
    ::_exit(128 + launcher_death_signal);
  }
  if (out >= 0) {
    ::dup2(out, 1);
    ::dup2(err, 2);
  }
  ::execvpe(args[0], args, envp);
  const char* why = std::strerror(errno);
  [[maybe_unused]] auto w1 = ::write(2, cannot.data(), cannot.size());
  [[maybe_unused]] auto w2 = ::write(2, why, std::strlen(why));
  [[maybe_unused]] auto w3 = ::write(2, "\n", 1);
  ::_exit(127);
}

rank_process start_rank(const job& j, int local, int round, const std::string& note_file,
                        const std::string& joiner = "") {
  rank_process r;
  r.rank = j.node_rank * j.nproc + local;
  r.joiner = joiner;
  auto env = rank_environment(j, local, round, note_file, joiner);
  auto command = j.command;
  auto envp = exec_list(env), args = exec_list(command);
  const std::string cannot = "ddprun: cannot run '" + j.command.front() + "': ";
  int out[2] = {-1, -1}, err[2] = {-1, -1};
  if (!j.no_prefix && (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0)) std::exit(1);
  const pid_t launcher = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) {
    std::perror("ddprun: fork");
    std::exit(1);
  }
  if (pid == 0) become_rank(args.data(), envp.data(), cannot, out[1], err[1], launcher);
  r.pid = pid;
  if (!j.no_prefix) {
    ::close(out[1]);
    ::close(err[1]);
    r.out = out[0];
    r.err = err[0];
    ::fcntl(r.out, F_SETFL, O_NONBLOCK); // the loop reads whatever is there, never waits on one pipe
    ::fcntl(r.err, F_SETFL, O_NONBLOCK);
  }
  return r;
}

/// Whether `pid`'s main thread has exited (a zombie, or dead): /proc/PID/stat's state.
bool main_thread_exited(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string s;
  std::getline(f, s);
  const auto close = s.rfind(')');
  return close != std::string::npos && close + 2 < s.size() && (s[close + 2] == 'Z' || s[close + 2] == 'X');
}

} // namespace

std::vector<rank_process> start_ranks(const job& j, int round, const std::string& note_file) {
  std::vector<rank_process> ranks;
  for (int local = 0; local < j.nproc; ++local)
    ranks.push_back(start_rank(j, local, round, note_file));
  return ranks;
}

rank_process start_joiner(const job& j, int local, int round, const std::string& note_file,
                          const std::string& joiner) {
  return start_rank(j, local, round, note_file, joiner);
}

std::optional<int> status_change(const rank_process& r) {
  int st = 0;
  if (::waitpid(r.pid, &st, WNOHANG | WUNTRACED | WCONTINUED) == r.pid) return st;
  return std::nullopt;
}

void signal_ranks(const std::vector<rank_process>& ranks, int sig) {
  for (auto& r : ranks)
    if (!r.exited) {
      ::kill(r.pid, sig);
      if (r.stopped && sig != SIGKILL)
        ::kill(r.pid, SIGCONT); // a stopped rank acts on it only once continued
    }
}

void date_dying_ranks(std::vector<rank_process>& ranks, std::int64_t ns) {
  for (auto& r : ranks)
    if (!r.exited && !r.dying_ns && main_thread_exited(r.pid)) r.dying_ns = ns;
}

bool all_exited(const std::vector<rank_process>& ranks) {
  for (auto& r : ranks)
    if (!r.exited) return false;
  return true;
}

bool any_output_open(const std::vector<rank_process>& ranks) {
  for (auto& r : ranks)
    if (r.out >= 0 || r.err >= 0) return true;
  return false;
}

} // namespace ddprun
