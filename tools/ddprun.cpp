// ddprun — starts N local ranks of a ddp (or torchrun-style) program, like torchrun.
//
//   ddprun --nproc-per-node 4 ./train --epochs 3
//   ddprun --nnodes 2 --node-rank 0 --master-addr node0 --master-port 29500 --nproc-per-node 8 ./train
//
// Each child gets RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, NODE_RANK,
// MASTER_ADDR, MASTER_PORT, DDP_TOKEN, DDP_STORE_IN_LAUNCHER=1 and DDP_RESTART_ROUND.
// Output lines are prefixed with "[rank] ".
//
// The rendezvous store: ddprun on node 0 serves it (as torchrun's agent does), so
// it outlives every rank and is still there to say which rank was lost; the ranks
// connect to it as clients (DDP_STORE_IN_LAUNCHER=1 tells them not to serve one).
//
// Restarts (--max-restarts N): when a rank fails, ddprun stops its local ranks,
// tells the other nodes' ddprun through the store (key ddprun/r<k>/failed), and
// every node relaunches its ranks in round k+1 (DDP_RESTART_ROUND=k+1; the ranks'
// store keys are scoped "r<k+1>/", so nothing of round k leaks in). After N
// restarts a failing job ends with the last failure's exit code.
// When one rank fails, the others get a grace period to finish (and report what they
// saw), then SIGTERM (and SIGCONT, for a stopped rank), then SIGKILL after another
// grace period; and ddprun exits with the code of the rank that failed *first*
// (128 + signal for a signal or a stop). First by time, not by rank: exits and
// stops are seen as they happen (waitpid with WUNTRACED every 20 ms), and a rank
// that fails on its own notes the moment in DDP_FAILURE_FILE before it tells its
// peers, who may exit before it does (see ddp/detail/common/failure_note.hpp); that file lies
// in a private folder of the round under $TMPDIR (else /tmp), removed when the round ends.
//
// --crash-report preloads libddp_crash_report.so (tools/crash_report.cpp) into every rank: a
// rank that dies of a fatal signal prints its frames before ddprun names the signal.
#include <ddp/detail/common/open_files.hpp>
#include <ddp/detail/common/timeout.hpp>
#include <ddp/store.hpp>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace {

int signal_pipe[2] = {-1, -1};

extern "C" void on_signal(int sig) {
  unsigned char s = static_cast<unsigned char>(sig);
  [[maybe_unused]] auto r = ::write(signal_pipe[1], &s, 1);
}

struct child {
  int rank = 0;
  pid_t pid = -1;
  int out = -1, err = -1; // read ends, -1 once closed
  std::string out_buf, err_buf;
  bool exited = false;
  bool stopped = false;
  int status = 0;
  /// When ddprun first saw the rank dying but not yet reapable (0: never): the
  /// main thread of a killed process is a zombie, and peers that check its pid
  /// see it gone, while its other threads still tear down; waitpid succeeds only
  /// after the last one. Under load that took over 380 ms (CI, 2026-12-03): a
  /// peer had failed on the loss and been reaped first, and was named first.
  std::int64_t dying_ns = 0;
};

/// Whether `pid`'s main thread has exited (a zombie, or dead): /proc/PID/stat's state.
bool main_thread_exited(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string s;
  std::getline(f, s);
  const auto close = s.rfind(')');
  return close != std::string::npos && close + 2 < s.size() && (s[close + 2] == 'Z' || s[close + 2] == 'X');
}

/// A failure as ddprun saw it: an exit with a non-zero code, a death by signal,
/// a stop, or a rank's own note. `prio` orders events seen in one pass: a
/// signal or a stop comes before the exits it causes.
struct failure {
  std::int64_t ns = 0; ///< wall clock
  int prio = 0;
  int rank = 0;
  std::string what; ///< "was killed by signal 9 (SIGKILL)"
  int code = 1;
  bool from_note = false;
};

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// Notes left by ranks that failed on their own: "<unix ns> <rank> <reason>".
std::vector<failure> read_notes(const std::string& path) {
  std::vector<failure> out;
  std::ifstream f(path);
  std::string line;
  while (std::getline(f, line)) {
    auto a = line.find(' ');
    auto b = a == std::string::npos ? a : line.find(' ', a + 1);
    if (b == std::string::npos) continue;
    try {
      failure e;
      e.ns = std::stoll(line.substr(0, a));
      e.rank = std::stoi(line.substr(a + 1, b - a - 1));
      e.what = "failed: " + line.substr(b + 1);
      e.prio = -1; // it wrote the note before anything else happened
      e.from_note = true;
      out.push_back(e);
    } catch (const std::exception&) {}
  }
  return out;
}

std::string random_token() {
  std::array<unsigned char, 16> b{};
  std::ifstream("/dev/urandom", std::ios::binary).read(reinterpret_cast<char*>(b.data()), b.size());
  static const char* hex = "0123456789abcdef";
  std::string s;
  for (auto c : b) {
    s += hex[c >> 4];
    s += hex[c & 15];
  }
  return s;
}

std::string describe(int status) {
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    int s = WTERMSIG(status);
    const char* name = ::sigabbrev_np(s);
    return "was killed by signal " + std::to_string(s) + (name ? std::string(" (SIG") + name + ")" : "");
  }
  return "stopped";
}

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

/// Moves complete lines of `buf` to `to`, each prefixed; with `flush`, the rest too.
void emit_lines(std::string& buf, FILE* to, const std::string& prefix, bool flush) {
  std::size_t start = 0;
  for (;;) {
    auto nl = buf.find('\n', start);
    if (nl == std::string::npos) break;
    std::string line = prefix + buf.substr(start, nl - start + 1);
    std::fwrite(line.data(), 1, line.size(), to);
    start = nl + 1;
  }
  buf.erase(0, start);
  if (flush && !buf.empty()) {
    std::string line = prefix + buf + "\n";
    std::fwrite(line.data(), 1, line.size(), to);
    buf.clear();
  }
  std::fflush(to);
}

/// Reads what is available on `fd`; closes it at EOF.
void drain(int& fd, std::string& buf, FILE* to, const std::string& prefix) {
  char tmp[65536];
  ssize_t k = ::read(fd, tmp, sizeof tmp);
  if (k > 0) {
    buf.append(tmp, static_cast<std::size_t>(k));
    emit_lines(buf, to, prefix, false);
  } else if (k == 0 || (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK)) {
    emit_lines(buf, to, prefix, true);
    ::close(fd);
    fd = -1;
  }
}

/// What one round of the job came to on this node.
struct round_outcome {
  bool failed = false;      ///< a local rank failed, or another node reported a failure
  bool user_signal = false; ///< ddprun itself got SIGINT, SIGTERM or SIGQUIT: no restart
  int exit_code = 0;
  std::string what; ///< the failure, for the store and the final message
};

struct job {
  int nproc = 1, nnodes = 1, node_rank = 0, master_port = 0, store_port = 0, max_restarts = 0;
  double grace = 5.0;
  std::string master_addr, token;
  bool no_prefix = false;
  std::string crash_report; ///< --crash-report: the library preloaded into every rank
  std::vector<std::string> command;
  /// Node 0: serves the store (and is a client of it); other nodes with
  /// restarts: a client, to hear of failures elsewhere. Null otherwise.
  std::unique_ptr<ddp::tcp_store> store;
};

std::string round_key(int round, const std::string& what) {
  return "ddprun/r" + std::to_string(round) + "/" + what;
}

/// The exit code in a failure report "<code> <what>" (1 when unreadable).
int reported_code(std::string_view report) {
  auto code = ddp::detail::parse_int(report.substr(0, report.find(' ')));
  return code && *code > 0 && *code < 256 ? static_cast<int>(*code) : 1;
}

/// Reports this round's failure to the other nodes, unless one was reported
/// already: the first report is the job's failure, and its code every node's.
void report_round_failure(job& j, int round, const std::string& report) {
  if (j.store->add(round_key(round, "failures"), 1) == 1) j.store->set(round_key(round, "failed"), report);
}

/// The environment of a rank, built before fork: the child only execs (ddprun
/// runs the store's thread, so a child must not allocate: a lock held by that
/// thread at fork time would never be released in the child).
std::vector<std::string> rank_environment(const job& j, int local, int round, const std::string& note_file) {
  std::vector<std::string> env;
  // What ddprun sets below; LD_PRELOAD only under --crash-report (which keeps the user's).
  auto skip = [&j](std::string_view kv) {
    for (std::string_view n :
         {"RANK=", "LOCAL_RANK=", "WORLD_SIZE=", "LOCAL_WORLD_SIZE=", "GROUP_RANK=", "NODE_RANK=",
          "MASTER_ADDR=", "MASTER_PORT=", "DDP_TOKEN=", "DDP_FAILURE_FILE=", "DDP_STORE_IN_LAUNCHER=",
          "DDP_RESTART_ROUND=", "TORCHELASTIC_USE_AGENT_STORE="})
      if (kv.starts_with(n)) return true;
    return !j.crash_report.empty() && kv.starts_with("LD_PRELOAD=");
  };
  for (char** e = environ; *e; ++e)
    if (!skip(*e)) env.emplace_back(*e);
  auto set = [&](const char* n, const std::string& v) { env.push_back(std::string(n) + "=" + v); };
  set("RANK", std::to_string(j.node_rank * j.nproc + local));
  set("LOCAL_RANK", std::to_string(local));
  set("WORLD_SIZE", std::to_string(j.nnodes * j.nproc));
  set("LOCAL_WORLD_SIZE", std::to_string(j.nproc));
  set("GROUP_RANK", std::to_string(j.node_rank));
  set("NODE_RANK", std::to_string(j.node_rank));
  set("MASTER_ADDR", j.master_addr);
  set("MASTER_PORT", std::to_string(j.master_port));
  set("DDP_TOKEN", j.token);
  set("DDP_STORE_IN_LAUNCHER", "1");
  set("DDP_RESTART_ROUND", std::to_string(round));
  if (!note_file.empty()) set("DDP_FAILURE_FILE", note_file);
  if (!j.crash_report.empty()) {
    // After whatever the user preloads already: a sanitizer's runtime must come first.
    const char* before = std::getenv("LD_PRELOAD");
    set("LD_PRELOAD",
        (before != nullptr && *before != '\0' ? std::string(before) + " " : "") + j.crash_report);
  }
  return env;
}

#ifndef DDP_CRASH_REPORT_FROM_BINDIR
#define DDP_CRASH_REPORT_FROM_BINDIR "../lib/ddp"
#endif

/// --crash-report's library (tools/crash_report.cpp): beside this ddprun in a build tree, or
/// where `cmake --install` puts it relative to the installed ddprun. Exits 2, naming both
/// places, when neither has it, or when its path cannot go into LD_PRELOAD (which splits at
/// spaces and colons: the ranks would start without it, and nothing would say so).
std::string find_crash_report() {
  std::string self(4096, '\0');
  const ssize_t len = ::readlink("/proc/self/exe", self.data(), self.size() - 1);
  self.resize(len > 0 ? static_cast<std::size_t>(len) : 0);
  const std::string dir = self.substr(0, self.rfind('/') == std::string::npos ? 0 : self.rfind('/'));
  const std::string name = "libddp_crash_report.so";
  const std::string beside = dir + "/" + name, installed = dir + "/" DDP_CRASH_REPORT_FROM_BINDIR "/" + name;
  for (const std::string& path : {beside, installed}) {
    if (::access(path.c_str(), R_OK) != 0) continue;
    if (path.find_first_of(" :") == std::string::npos) return path;
    std::fprintf(
        stderr,
        "ddprun: --crash-report: the path %s holds a space or a colon, which LD_PRELOAD cannot carry: "
        "move ddp's build or install to a path without them\n",
        path.c_str());
    std::exit(2);
  }
  std::fprintf(stderr,
               "ddprun: --crash-report: %s is neither at %s nor at %s: build the ddp_crash_report target "
               "beside ddprun, or install ddp with its tools (DDP_BUILD_TOOLS=ON)\n",
               name.c_str(), beside.c_str(), installed.c_str());
  std::exit(2);
}

/// A private folder (mode 0700) for a round's failure notes: under $TMPDIR, where a cluster
/// points a job's own scratch space (/tmp may be small, full or shared), else under /tmp.
/// Empty when neither takes one: the job runs, and blame rests on exit times alone.
std::string make_note_dir() {
  const char* tmpdir = std::getenv("TMPDIR");
  static bool warned_relative = false; // once, not every restart round
  if (tmpdir != nullptr && tmpdir[0] != '\0' && tmpdir[0] != '/' && !warned_relative) {
    // The ranks run in other folders (a rank may chdir): a relative path would name another place.
    std::fprintf(
        stderr,
        "ddprun: warning: TMPDIR=%s is not an absolute path; the ranks' failure notes go under /tmp\n",
        tmpdir);
    warned_relative = true;
  }
  for (const char* base : {tmpdir, "/tmp"}) {
    if (base == nullptr || base[0] != '/') continue;
    std::string path = std::string(base) + "/ddprun-XXXXXX";
    if (::mkdtemp(path.data()) != nullptr) return path;
  }
  std::fprintf(stderr,
               "ddprun: warning: cannot create a folder for the ranks' failure notes under TMPDIR=%s or /tmp "
               "(%s): if a rank fails, the first to fail is judged by exit times alone\n",
               tmpdir != nullptr ? tmpdir : "(unset)", std::strerror(errno));
  return {};
}

/// Starts this node's ranks for `round`, watches them until every one has
/// exited, and says how the round went.
round_outcome run_round(job& j, int round) {
  // Where ranks that fail on their own say so, with the time (see the header).
  const std::string note_dir = make_note_dir();
  std::string note_file;
  if (!note_dir.empty()) note_file = note_dir + "/failures";
  const std::string failed_key = round_key(round, "failed");

  std::vector<child> kids(static_cast<std::size_t>(j.nproc));
  for (int local = 0; local < j.nproc; ++local) {
    auto& k = kids[static_cast<std::size_t>(local)];
    k.rank = j.node_rank * j.nproc + local;
    auto env = rank_environment(j, local, round, note_file);
    std::vector<char*> envp, args;
    for (auto& e : env)
      envp.push_back(e.data());
    envp.push_back(nullptr);
    for (auto& a : j.command)
      args.push_back(a.data());
    args.push_back(nullptr);
    const std::string cannot = "ddprun: cannot run '" + j.command.front() + "': ";
    int out[2] = {-1, -1}, err[2] = {-1, -1};
    if (!j.no_prefix && (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0)) std::exit(1);
    pid_t pid = ::fork();
    if (pid < 0) {
      std::perror("ddprun: fork");
      std::exit(1);
    }
    if (pid == 0) {
      ::signal(SIGINT, SIG_DFL);
      ::signal(SIGTERM, SIG_DFL);
      ::signal(SIGQUIT, SIG_DFL);
      if (!j.no_prefix) {
        ::dup2(out[1], 1);
        ::dup2(err[1], 2);
      }
      ::execvpe(args[0], args.data(), envp.data());
      const char* why = std::strerror(errno);
      [[maybe_unused]] auto w1 = ::write(2, cannot.data(), cannot.size());
      [[maybe_unused]] auto w2 = ::write(2, why, std::strlen(why));
      [[maybe_unused]] auto w3 = ::write(2, "\n", 1);
      ::_exit(127);
    }
    k.pid = pid;
    if (!j.no_prefix) {
      ::close(out[1]);
      ::close(err[1]);
      k.out = out[0];
      k.err = err[0];
      ::fcntl(k.out, F_SETFL, O_NONBLOCK); // the loop reads whatever is there, never waits on one pipe
      ::fcntl(k.err, F_SETFL, O_NONBLOCK);
    }
  }

  using clock = std::chrono::steady_clock;
  const auto grace_span = std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(j.grace));
  // Deadlines; `never` when not armed (now() > never is false).
  constexpr auto never = clock::time_point::max();
  constexpr clock::duration quit_report_span = std::chrono::seconds(5);
  clock::time_point term_at = never, kill_at = never, pipes_deadline = never;
  // Another node's failure is looked for in the store this often (a check is one
  // round trip, well under a millisecond on a live store).
  const bool watch_store = j.store && j.nnodes > 1 && j.max_restarts > 0;
  clock::time_point next_store_check = clock::now();
  round_outcome res;
  bool failed = false, remote_failure = false;
  std::vector<failure> failures;
  auto terminate_all = [&](int sig) {
    for (auto& k : kids)
      if (!k.exited) {
        ::kill(k.pid, sig);
        if (k.stopped && sig != SIGKILL)
          ::kill(k.pid, SIGCONT); // a stopped rank acts on it only once continued
      }
  };
  for (;;) {
    std::vector<pollfd> fds{{signal_pipe[0], POLLIN, 0}};
    for (auto& k : kids) {
      if (k.out >= 0) fds.push_back({k.out, POLLIN, 0});
      if (k.err >= 0) fds.push_back({k.err, POLLIN, 0});
    }
    ::poll(fds.data(), fds.size(), 20);
    unsigned char sig;
    while (::read(signal_pipe[0], &sig, 1) == 1) {
      std::fprintf(stderr, "ddprun: got signal %d, forwarding it to every rank\n", sig);
      terminate_all(sig); // the user asked: forward at once
      term_at = never;
      if (kill_at == never) kill_at = clock::now() + grace_span;
      // SIGQUIT asks ranks under --crash-report for every thread's frames, which takes up to 4 s
      // (tools/crash_report.cpp): at least 5 s before SIGKILL, whatever the grace period.
      if (sig == SIGQUIT) kill_at = std::max(kill_at, clock::now() + std::max(grace_span, quit_report_span));
      if (res.exit_code == 0) res.exit_code = 128 + sig;
      res.user_signal = true;
    }
    for (auto& k : kids) {
      // Appended, not "[" + std::to_string(...): g++ 12 at -O3 reports a false -Wrestrict
      // inside that operator+ (GCC bug 105329), which broke Release builds under -Werror.
      std::string prefix = "[";
      prefix += std::to_string(k.rank);
      prefix += "] ";
      if (k.out >= 0) drain(k.out, k.out_buf, stdout, prefix);
      if (k.err >= 0) drain(k.err, k.err_buf, stderr, prefix);
    }
    // Reap children that exited; note those that stopped.
    const auto pass_ns = now_ns();
    const auto failures_before_pass = failures.size();
    for (auto& k : kids) {
      if (k.exited) continue;
      int st = 0;
      if (::waitpid(k.pid, &st, WNOHANG | WUNTRACED | WCONTINUED) == k.pid) {
        if (WIFCONTINUED(st)) {
          k.stopped = false;
          continue;
        }
        if (WIFSTOPPED(st)) {
          k.stopped = true;
          int s = WSTOPSIG(st);
          const char* name = ::sigabbrev_np(s);
          failures.push_back(
              {pass_ns, 0, k.rank,
               "was stopped by signal " + std::to_string(s) + (name ? std::string(" (SIG") + name + ")" : ""),
               128 + s, false});
          std::fprintf(stderr, "ddprun: rank %d (pid %d) %s\n", k.rank, k.pid, failures.back().what.c_str());
          continue;
        }
        k.exited = true;
        k.status = st;
        bool ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
        if (!ok)
          failures.push_back({k.dying_ns ? k.dying_ns : pass_ns, WIFSIGNALED(st) ? 0 : 1, k.rank,
                              describe(st), exit_code_of(st), false});
        if (!ok && !failed && kill_at == never) {
          // The others usually fail on their own a moment later, with their own
          // error: let them say it before stopping them.
          failed = true;
          res.exit_code = exit_code_of(st);
          std::fprintf(stderr, "ddprun: rank %d (pid %d) %s; stopping the other ranks\n", k.rank, k.pid,
                       describe(st).c_str());
          if (term_at == never) term_at = clock::now() + grace_span;
          if (watch_store && !remote_failure) {
            try { // tell the other nodes (best effort: they also see our ranks leave the mesh)
              report_round_failure(j, round,
                                   std::to_string(exit_code_of(st)) + " rank " + std::to_string(k.rank) +
                                       " " + describe(st));
            } catch (const std::exception& e) { std::fprintf(stderr, "ddprun: %s\n", e.what()); }
          }
        } else if (!ok && kill_at != never && !failed) {
          failed = true;
        }
      }
    }
    // A rank that failed in this pass may have failed because another one died
    // first, which is not reapable yet: that one is dated by this pass too, and
    // a death by signal comes first in it (prio).
    if (failures.size() > failures_before_pass)
      for (auto& k : kids)
        if (!k.exited && !k.dying_ns && main_thread_exited(k.pid)) k.dying_ns = pass_ns;
    if (watch_store && !failed && !remote_failure && !res.user_signal && clock::now() >= next_store_check) {
      next_store_check = clock::now() + std::chrono::milliseconds(100);
      try {
        if (auto v = j.store->try_get(failed_key, std::chrono::seconds(10))) {
          remote_failure = true;
          res.what = "on another node: " + *v;
          std::fprintf(stderr,
                       "ddprun: node %d: another node reported a failure (%s); stopping the local ranks\n",
                       j.node_rank, v->c_str());
          res.exit_code = reported_code(*v);
          if (term_at == never) term_at = clock::now() + grace_span;
        }
      } catch (const std::exception& e) {
        std::fprintf(stderr, "ddprun: node %d: the store on the master node does not answer: %s\n",
                     j.node_rank, e.what());
        remote_failure = true;
        res.exit_code = 1;
        res.what = "the store on the master node is gone";
        if (term_at == never) term_at = clock::now() + grace_span;
      }
    }
    bool all_exited = true;
    for (auto& k : kids)
      all_exited &= k.exited;
    bool pipes_open = false;
    for (auto& k : kids)
      pipes_open |= k.out >= 0 || k.err >= 0;
    if (all_exited && !pipes_open) break;
    if (all_exited && pipes_open) {
      // Grandchildren may hold the pipes; give them a moment, then stop reading.
      if (pipes_deadline == never) pipes_deadline = clock::now() + std::chrono::seconds(1);
      if (clock::now() > pipes_deadline) break;
    }
    if (clock::now() > term_at) {
      terminate_all(SIGTERM);
      term_at = never;
      kill_at = clock::now() + grace_span;
    }
    if (clock::now() > kill_at) {
      terminate_all(SIGKILL);
      kill_at = clock::now() + std::chrono::hours(24);
    }
  }
  if (!note_file.empty()) {
    for (auto& n : read_notes(note_file)) {
      // The note's rank exits with its own code, reported with it.
      for (auto& k : kids)
        if (k.rank == n.rank && k.exited) n.code = exit_code_of(k.status);
      failures.push_back(n);
    }
    ::unlink(note_file.c_str());
    ::rmdir(note_dir.c_str());
  }
  if (remote_failure) {
    res.failed = true;
    return res; // our ranks were stopped for another node's failure: that one is the job's
  }
  // A stop or a note matters only when the job failed.
  bool job_failed = std::any_of(failures.begin(), failures.end(), [&](const failure& f) {
    return !f.from_note && f.what.rfind("was stopped", 0) != 0;
  });
  if (job_failed && res.exit_code == 0) res.exit_code = 1;
  if (job_failed && !res.user_signal) {
    auto first = std::min_element(failures.begin(), failures.end(), [](const failure& a, const failure& b) {
      return a.ns != b.ns ? a.ns < b.ns : a.prio < b.prio;
    });
    std::fprintf(stderr, "ddprun: the first rank to fail was rank %d: it %s (ddprun exits with %d)\n",
                 first->rank, first->what.c_str(), first->code);
    res.exit_code = first->code;
    res.what = "rank " + std::to_string(first->rank) + " " + first->what;
  }
  res.failed = job_failed || res.user_signal;
  return res;
}

/// Several nodes with restarts: every node says how its round ended, then all
/// agree: the round failed if any node failed (its code is the job's).
/// Returns false when the other nodes did not report in time.
bool agree_on_round(job& j, int round, round_outcome& res) {
  const std::string failed_key = round_key(round, "failed");
  try {
    if (res.failed && !res.user_signal)
      report_round_failure(j, round, std::to_string(res.exit_code) + " " + res.what);
    if (res.user_signal) j.store->set("ddprun/stop", "interrupted on node " + std::to_string(j.node_rank));
    j.store->set(round_key(round, "ended/" + std::to_string(j.node_rank)), res.failed ? "failed" : "ok");
    std::vector<std::string> ended;
    for (int n = 0; n < j.nnodes; ++n)
      ended.push_back(round_key(round, "ended/" + std::to_string(n)));
    // Every node's ranks end within their own timeout plus two grace periods.
    j.store->wait(ended,
                  ddp::detail::default_timeout() + std::chrono::seconds(static_cast<long>(4 * j.grace + 30)));
    // The first failure reported, on whichever node, is the job's: every node ends with its code.
    if (auto v = j.store->try_get(failed_key)) {
      res.failed = true;
      res.exit_code = reported_code(*v);
      res.what = *v;
    }
    if (j.store->check({"ddprun/stop"})) res.user_signal = true;
    return true;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddprun: node %d: could not agree with the other nodes on how round %d ended: %s\n",
                 j.node_rank, round, e.what());
    return false;
  }
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"ddprun: launch the local ranks of a distributed data-parallel job"};
  job j;
  j.master_addr = "127.0.0.1";
  int master_port = -1;
  app.add_option("--nproc-per-node,--nproc_per_node", j.nproc, "processes (ranks) on this node")
      ->check(CLI::Range(1, 4096));
  app.add_option("--nnodes", j.nnodes, "number of nodes in the job")->check(CLI::Range(1, 65536));
  app.add_option("--node-rank,--node_rank", j.node_rank, "index of this node, 0..nnodes-1")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--master-addr,--master_addr", j.master_addr,
                 "address of node 0, where its ddprun serves the rendezvous store");
  app.add_option(
         "--master-port,--master_port", master_port,
         "port of the store; 0 picks a free one (single node only). Default: 0 on one node, 29500 on several")
      ->check(CLI::Range(0, 65535));
  app.add_option("--grace-period", j.grace,
                 "when a rank fails: seconds the others get before SIGTERM, and again before SIGKILL")
      ->check(CLI::Range(0.0, 3600.0));
  app.add_option("--max-restarts,--max_restarts", j.max_restarts,
                 "when a rank fails, stop every rank and start them all again, up to N times (the same N on "
                 "every node); each rank sees the round in DDP_RESTART_ROUND")
      ->check(CLI::Range(0, 1000000));
  app.add_flag("--no-prefix", j.no_prefix, "do not prefix output lines with [rank]");
  bool crash_report = false;
  app.add_flag("--crash-report", crash_report,
               "preload libddp_crash_report.so into every rank: a rank that dies of SIGSEGV, SIGBUS, SIGFPE, "
               "SIGILL or SIGABRT prints its frames (scripts/symbolize-crash names their lines)");
  // Everything from the program name on belongs to the program, like torchrun.
  app.prefix_command(true);
  app.footer("usage: ddprun [options] [--] program [args...]");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) { return app.exit(e); }
  j.command = app.remaining();
  if (!j.command.empty() && j.command.front() == "--") j.command.erase(j.command.begin());
  if (j.command.empty()) {
    std::cerr << "ddprun: no program given\n" << app.help();
    return 2;
  }
  if (crash_report) j.crash_report = find_crash_report();
  if (j.node_rank >= j.nnodes) {
    std::cerr << "ddprun: --node-rank " << j.node_rank << " must be below --nnodes " << j.nnodes << "\n";
    return 2;
  }
  if (master_port < 0) master_port = j.nnodes > 1 ? 29500 : 0;
  if (master_port == 0 && j.nnodes > 1) {
    std::cerr << "ddprun: --master-port 0 (pick a free port) works on one node only: give every node the "
                 "same port\n";
    return 2;
  }
  if (const char* t = std::getenv("DDP_TOKEN"); t && *t)
    j.token = t;
  else if (j.nnodes > 1) {
    std::cerr << "ddprun: with several nodes, export the same DDP_TOKEN on every node (e.g. "
                 "DDP_TOKEN=$(openssl rand -hex 16))\n";
    return 2;
  } else
    j.token = random_token();

  // Before the store listens: the open-files limit must cover two connections
  // per rank there, and the ranks (which inherit it) raise their own.
  try {
    ddp::detail::open_files_need need;
    need.in_use = ddp::detail::open_files_in_use();
    need.store_server = j.node_rank == 0 ? ddp::detail::store_server_open_files(j.nnodes * j.nproc) : 0;
    need.store_client = 2;
    need.launcher = 2L * j.nproc + 2; // each rank's stdout and stderr, the signal pipe
    if (j.node_rank == 0) need.spare += ddp::detail::store_fd_reserve_max; // or the server pauses accepting
    ddp::detail::ensure_open_files(need, "node " + std::to_string(j.node_rank),
                                   "a job of " + std::to_string(j.nnodes * j.nproc) + " ranks, " +
                                       std::to_string(j.nproc) + " on this node,");
  } catch (const std::exception& e) {
    std::cerr << "ddprun: " << e.what() << "\n";
    return 2;
  }

  // The store: on node 0, served here on MASTER_PORT (or DDP_STORE_PORT, which the
  // ranks read too), so it outlives every rank; port 0 binds a free one at once.
  try {
    ddp::tcp_store_options so;
    so.host = j.master_addr;
    so.port = master_port;
    if (auto p = ddp::detail::env_int("DDP_STORE_PORT", 1, 65535)) so.port = static_cast<int>(*p);
    so.token = j.token;
    so.timeout = ddp::detail::default_timeout();
    so.serve = j.node_rank == 0;
    if (so.serve || j.max_restarts > 0) j.store = std::make_unique<ddp::tcp_store>(so);
    j.store_port = j.store ? j.store->port() : so.port;
    j.master_port = master_port == 0 ? j.store_port : master_port;
  } catch (const std::exception& e) {
    std::cerr << "ddprun: " << e.what() << "\n";
    return 2;
  }

  if (::pipe2(signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) return 1;
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  // SIGQUIT too (Ctrl-\, `timeout -s QUIT`): the ranks get it, and under --crash-report print
  // every thread's frames; ddprun stays to pass their output on, then names the signal.
  ::sigaction(SIGQUIT, &sa, nullptr);

  for (int round = 0;; ++round) {
    round_outcome res = run_round(j, round);
    if (j.store && j.nnodes > 1 && j.max_restarts > 0 && !agree_on_round(j, round, res))
      return res.exit_code ? res.exit_code : 1;
    if (!res.failed || res.user_signal) return res.exit_code;
    if (round >= j.max_restarts) {
      if (j.max_restarts > 0)
        std::fprintf(stderr,
                     "ddprun: the job failed in round %d and --max-restarts %d are spent (ddprun exits "
                     "with %d)\n",
                     round, j.max_restarts, res.exit_code);
      return res.exit_code;
    }
    std::fprintf(stderr, "ddprun: restarting every rank: round %d of at most %d (--max-restarts %d)\n",
                 round + 1, j.max_restarts + 1, j.max_restarts);
  }
}
