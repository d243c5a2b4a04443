// libddp_crash_report.so: preloaded (LD_PRELOAD) into a program and every process it starts,
// it prints where a process died when a fatal signal ends it (SIGSEGV, SIGBUS, SIGFPE, SIGILL,
// SIGABRT: abort(), a failed assert, an uncaught exception), then lets the same signal end it,
// so a launcher sees the same death. glibc 2.35 removed libSegFault, which did this. On
// SIGQUIT (Ctrl-\, `timeout -s QUIT`: what scripts/dev/gpu-check sends a check that ran out of
// time) it prints every thread's frames, then dies of SIGQUIT: where a hung process hangs.
// Here: the handlers and what they print; crash_report/ holds the parts they call (a line
// without the heap, the loaded modules, the frames, the threads).
//
// Why ddp has it: the lent GPU machine has no debugger and holds a session for 15 minutes
// (../shared/FACTS.md); the last time DDP ran there on device gradients it died of SIGSEGV, and
// the exit status alone said nothing of where. scripts/dev/gpu-check preloads this into every
// program of ours it runs, and `ddprun --crash-report` into the ranks; scripts/dev/symbolize-crash
// turns the frames into functions, files and lines with the unstripped binaries of the build
// that made the ones that ran (the carried ones are stripped).
//
// What it prints, on standard error, a line at a time (one write each, so ranks sharing a
// terminal interleave whole lines only):
//   ddp crash report: pid 4242, thread 4250: SIGSEGV (address 0x10, SEGV_MAPERR: ...)
//   ddp crash report: pid 4242:  #1 /path/to/binary+0x1a2b3 fault
//   ddp crash report: pid 4242:  #2 /usr/lib/x86_64-linux-gnu/libgloo.so.0+0x5f00
//   ddp crash report: pid 4242: module /path/to/binary build-id 3f1c...
// A frame is its module and its ELF virtual address there (the address minus the module's load
// bias: what addr2line takes, for position-independent and fixed-address files alike). The frame
// the signal stopped says so: " fault" (its address is the faulting instruction) or
// " interrupted" (a signal sent by kill, timeout or abort: the next instruction); the others are
// return addresses. Each module is named with its GNU build ID, so the symbolizer uses only a
// copy of the very build that ran. When two threads die at once, the first reports and the
// other waits for its end (the lines never mix). DDP_CRASH_REPORT=0 turns it off.
//
// In a signal handler only async-signal-safe calls are sure to work. The handler finds a frame's
// module with glibc's _dl_find_object (2.35+), which takes no lock and is async-signal-safe;
// dladdr would take the loader's lock, and a crash while another thread is inside dlopen (CUDA
// and NCCL load libraries on their threads) could then hang instead of dying (a reviewer's probe
// did). On an older glibc it falls back to dladdr1 with that risk (DDP_CRASH_REPORT_LOOKUP=dladdr
// forces it, for tests). backtrace() is called once at load, so the unwinder is loaded then, not
// inside a handler. A process whose memory is corrupt may print less; it still dies of its signal.
#include "crash_report/frames.hpp"
#include "crash_report/line.hpp"
#include "crash_report/modules.hpp"
#include "crash_report/threads.hpp"

#include <dlfcn.h>
#include <signal.h>
#include <ucontext.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace {

using namespace ddp_crash_report;

const char* signal_name(int sig) {
  switch (sig) {
  case SIGSEGV: return "SIGSEGV";
  case SIGBUS: return "SIGBUS";
  case SIGFPE: return "SIGFPE";
  case SIGILL: return "SIGILL";
  case SIGABRT: return "SIGABRT";
  default: return "signal";
  }
}

const char* code_name(int sig, int code) {
  if (sig == SIGSEGV && code == SEGV_MAPERR) return "SEGV_MAPERR: no memory mapped there";
  if (sig == SIGSEGV && code == SEGV_ACCERR) return "SEGV_ACCERR: not allowed there";
  if (sig == SIGBUS && code == BUS_ADRERR) return "BUS_ADRERR: no such physical address (a truncated file?)";
  if (sig == SIGBUS && code == BUS_ADRALN) return "BUS_ADRALN: misaligned";
  if (sig == SIGFPE && code == FPE_INTDIV) return "FPE_INTDIV: integer divide by zero";
  if (sig == SIGILL && code == ILL_ILLOPN) return "ILL_ILLOPN: illegal operand";
  if (sig == SIGILL && code == ILL_ILLOPC) return "ILL_ILLOPC: illegal opcode (built for another CPU?)";
  return nullptr;
}

constexpr int fatal_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};

// A fault the kernel raised (si_addr is then its address), not a signal a process sent.
bool kernel_fault(int sig, const siginfo_t* info) {
  return sig != SIGABRT && info != nullptr && info->si_code > 0;
}

void report(int sig, siginfo_t* info, const ucontext_t* context) {
  line head;
  start_thread_line(head, this_thread()) << signal_name(sig);
  const bool faulted = kernel_fault(sig, info);
  if (faulted && info->si_code == SI_KERNEL) {
    head << " (address unknown: a general protection fault, e.g. a non-canonical pointer)";
  } else if (faulted) {
    head << " (address ";
    head.hex(reinterpret_cast<std::uintptr_t>(info->si_addr));
    if (const char* what = code_name(sig, info->si_code)) head << ", " << what;
    head << ")";
  }
  head.write_out();
  print_frames(context, faulted);
  print_modules();
}

// The default action, then the signal again: blocked while a handler runs, it ends the process
// as soon as the handler returns (a fault would also recur). Set here: a handler the program
// installed later may be calling this one, and is still installed.
void die_of(int sig) {
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  sigemptyset(&default_action.sa_mask);
  ::sigaction(sig, &default_action, nullptr);
  ::raise(sig);
}

// The thread printing its report (0: none). Threads that die meanwhile wait for it: their
// lines would interleave with its own, and the first death is the one to explain. Its re-raise
// ends the process, waiting threads included; if it is stuck (a standard error nobody reads),
// a waiting thread ends the process itself after 10 s.
std::atomic<pid_t> reporting_thread{0};
static_assert(std::atomic<pid_t>::is_always_lock_free, "a lock-free atomic is async-signal-safe");
constexpr int wait_for_report_ms = 10000;

// A thread that dies while another prints a SIGQUIT dump: told at the dump's end (the first
// one only), and the process dies of its signal, not of SIGQUIT.
std::atomic<int> late_signal{0};
std::atomic<pid_t> late_thread{0};
std::atomic<std::uintptr_t> late_address{0};
std::atomic<bool> late_address_known{false}; // a fault's (0 is an answer: a null pointer)

void on_fatal_signal(int sig, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  const pid_t self = this_thread();
  pid_t owner = 0;
  if (reporting_thread.compare_exchange_strong(owner, self)) {
    report(sig, info, static_cast<const ucontext_t*>(context));
  } else if (owner != self) {
    int none = 0;
    if (late_signal.compare_exchange_strong(none, sig)) {
      late_thread.store(self);
      if (kernel_fault(sig, info)) {
        late_address.store(reinterpret_cast<std::uintptr_t>(info->si_addr));
        late_address_known.store(true);
      }
    }
    for (int waited = 0; waited < wait_for_report_ms; waited += 10)
      wait_ms(10);
  }
  errno = saved_errno;
  die_of(sig);
}

// SIGQUIT (Ctrl-\, `timeout -s QUIT`, ddprun passing it on): a hung process says where each of
// its threads is, then dies of SIGQUIT as it would have. The thread the signal reached prints its
// own frames, then asks every other thread in turn (SIGQUIT again, sent to that thread alone)
// and waits for it to print its own. A thread that blocks SIGQUIT is named and skipped after
// 250 ms, not waited for. Time limits: 1 s a thread, 4 s in all, under ddprun's grace period
// (at least 5 s after a SIGQUIT) before SIGKILL.
//
// The ask is a handshake, so answers never mix: the dumping thread stores the tid in
// asked_thread; the asked thread claims it (tid -> -tid) before printing, and stores its tid in
// answered_thread after. Another SIGQUIT reaching that thread meanwhile (timeout and a terminal
// signal the whole process group, ddprun passes it on too) finds no tid to claim and is ignored;
// an answer that comes after the dumping thread took the ask back (tid -> 0) is never printed.
std::atomic<pid_t> asked_thread{0};
std::atomic<pid_t> answered_thread{0};
constexpr std::int64_t wait_for_thread_ns = 1'000'000'000;
constexpr std::int64_t wait_for_all_ns = 4'000'000'000;
// A thread inside this library's handler leaves it (and unblocks SIGQUIT) in microseconds.
constexpr std::int64_t blocked_for_ns = 250'000'000;
constexpr int max_threads = 1024;

bool wait_for_answer(pid_t thread) {
  const std::int64_t until = monotonic_ns() + wait_for_thread_ns;
  while (answered_thread.load() != thread && monotonic_ns() < until)
    wait_ms(1);
  return answered_thread.load() == thread;
}

// Asks one thread for its frames; false when it did not answer in time.
bool ask_thread(pid_t thread) {
  asked_thread.store(thread);
  if (::syscall(SYS_tgkill, ::getpid(), thread, SIGQUIT) != 0) { // it has exited since
    asked_thread.store(0);
    return true;
  }
  bool answered = wait_for_answer(thread);
  pid_t expected = thread;
  if (!answered && asked_thread.compare_exchange_strong(expected, 0)) return false; // never claimed
  if (!answered) answered = wait_for_answer(thread); // claimed (-thread): printing; let it finish
  asked_thread.store(0);
  return answered;
}

// Whether a thread still blocks `sig` after `ns`: a thread inside one of this library's
// handlers (a second SIGQUIT, which it ignores) blocks SIGQUIT only for that moment.
bool blocks_signal_for(pid_t thread, int sig, std::int64_t ns) {
  const std::int64_t until = monotonic_ns() + ns;
  while (blocks_signal(thread, sig)) {
    if (monotonic_ns() >= until) return true;
    wait_ms(1);
  }
  return false;
}

[[gnu::noinline]] void dump_every_thread(const ucontext_t* context) {
  const pid_t self = this_thread();
  line head;
  start_thread_line(head, self) << "SIGQUIT: the frames of every thread follow, this one's first";
  head.write_out();
  print_frames(context, false);
  static pid_t threads[max_threads]; // static: the alternate stack is 64 KiB
  const int n = list_threads(threads, max_threads);
  const std::int64_t give_up_at = monotonic_ns() + wait_for_all_ns;
  for (int i = 0; i < n; ++i) {
    if (threads[i] == self) continue;
    line note;
    if (blocks_signal_for(threads[i], SIGQUIT, blocked_for_ns)) {
      start_thread_line(note, threads[i]) << "blocks SIGQUIT: its frames cannot be shown";
      note.write_out();
      continue;
    }
    if (monotonic_ns() >= give_up_at) {
      start_thread_line(note, threads[i]) << "not asked for its frames: the 4 s for all threads are spent";
      note.write_out();
      continue;
    }
    if (!ask_thread(threads[i])) {
      start_thread_line(note, threads[i]) << "did not answer within 1 s (stuck with signals held off?)";
      note.write_out();
    }
  }
  if (const int sig = late_signal.load(); sig != 0) {
    line late;
    start_thread_line(late, late_thread.load()) << signal_name(sig);
    if (late_address_known.load()) {
      late << " (address ";
      late.hex(late_address.load()) << ")";
    }
    late << ": this thread died while the frames were printed; the process dies of its signal";
    late.write_out();
  }
  print_modules();
}

void on_quit(int sig, siginfo_t*, void* context) {
  const int saved_errno = errno;
  const pid_t self = this_thread();
  pid_t asked = self;
  if (asked_thread.compare_exchange_strong(asked, -self)) { // the dumping thread asks this one
    line head;
    start_thread_line(head, self) << "frames";
    head.write_out();
    print_frames(static_cast<const ucontext_t*>(context), false);
    answered_thread.store(self);
    errno = saved_errno;
    return; // and carries on until the dumping thread ends the process
  }
  pid_t owner = 0;
  if (!reporting_thread.compare_exchange_strong(owner, self)) {
    errno = saved_errno; // a report is under way, or this is a second SIGQUIT: ignored
    return;
  }
  dump_every_thread(static_cast<const ucontext_t*>(context));
  errno = saved_errno;
  const int late = late_signal.load();
  die_of(late != 0 ? late : sig); // a thread that died meanwhile: its death is the one to tell
}

// Each thread that overflows its stack would need a stack of its own to report on; the main
// thread gets one, the others die of SIGSEGV unreported.
alignas(16) char alternate_stack[64 * 1024];

__attribute__((constructor)) void install_crash_report() {
  const char* setting = std::getenv("DDP_CRASH_REPORT");
  if (setting != nullptr && std::strcmp(setting, "0") == 0) return;
  void* warm[1];
  ::backtrace(warm, 1); // loads the unwinder now, not inside a handler
  // DDP_CRASH_REPORT_LOOKUP=dladdr: the lookup an older glibc gets (tools.crash_report tests it here).
  const char* lookup = std::getenv("DDP_CRASH_REPORT_LOOKUP");
  if (lookup == nullptr || std::strcmp(lookup, "dladdr") != 0)
    find_object = reinterpret_cast<find_object_fn>(::dlsym(RTLD_DEFAULT, "_dl_find_object"));
  const ssize_t len = ::readlink("/proc/self/exe", exe_path, sizeof(exe_path) - 1);
  exe_path[len > 0 ? len : 0] = '\0';
  if (const module self = module_of(reinterpret_cast<std::uintptr_t>(&report)); self.found) {
    own_bias = self.bias;
    own_bias_known = true;
  }

  stack_t stack{};
  stack.ss_sp = alternate_stack;
  stack.ss_size = sizeof(alternate_stack);
  ::sigaltstack(&stack, nullptr);

  struct sigaction action {};
  action.sa_sigaction = on_fatal_signal;
  // No SA_RESETHAND: a second thread's fault must wait in the handler, not end the process while
  // the first report is half printed. Every fatal signal is blocked while a report is printed: one
  // raised inside it (a fault in the handler) ends the process at once.
  action.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  for (int sig : fatal_signals)
    sigaddset(&action.sa_mask, sig);
  // A program started with a signal ignored, or one a loader-time library already handles,
  // keeps what it has.
  auto install = [](int sig, const struct sigaction& a) {
    struct sigaction before {};
    if (::sigaction(sig, nullptr, &before) == 0 && before.sa_handler == SIG_DFL)
      ::sigaction(sig, &a, nullptr);
  };
  for (int sig : fatal_signals)
    install(sig, action);
  // SIGQUIT: SA_RESTART, so the threads asked for their frames go back to what they were doing.
  struct sigaction quit = action;
  quit.sa_sigaction = on_quit;
  quit.sa_flags |= SA_RESTART;
  sigaddset(&quit.sa_mask, SIGQUIT);
  install(SIGQUIT, quit);
}

} // namespace
