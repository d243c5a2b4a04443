// libddp_crash_report.so: preloaded (LD_PRELOAD) into a program and every process it starts,
// it prints where a process died when a fatal signal ends it (SIGSEGV, SIGBUS, SIGFPE, SIGILL,
// SIGABRT: abort(), a failed assert, an uncaught exception), then lets the same signal end it,
// so a launcher sees the same death. glibc 2.35 removed libSegFault, which did this.
//
// Why ddp has it: the lent GPU machine has no debugger and holds a session for 15 minutes
// (../shared/FACTS.md); the last time DDP ran there on device gradients it died of SIGSEGV, and
// the exit status alone said nothing of where. scripts/gpu-check preloads this into every
// program it runs; scripts/symbolize-crash turns the frames into functions, files and lines
// with the unstripped binaries of the build that made the carried (stripped) ones.
//
// What it prints, on standard error, a line at a time (one write each, so ranks sharing a
// terminal interleave whole lines only):
//   ddp crash report: pid 4242, thread 4250: SIGSEGV (address 0x10, SEGV_MAPERR)
//   ddp crash report: pid 4242:  #3 /path/to/binary+0x1a2b3 fault
//   ddp crash report: pid 4242:  #4 /usr/lib/x86_64-linux-gnu/libgloo.so.0+0x5f00 (gloo::...+0x40)
// A frame is its module (the file dladdr names) and the offset from the module's load base; the
// frame where a fault happened says so (its offset is the faulting instruction; the others are
// return addresses). DDP_CRASH_REPORT=0 turns it off.
//
// In a signal handler only async-signal-safe calls are sure to work. backtrace() and dladdr()
// are not on POSIX's list: backtrace() is called once at load (it loads libgcc_s then, not in
// the handler), and dladdr() only reads the loader's lists. A process whose heap or loader state
// is corrupt may print less; it still dies of its signal.
#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace {

// A line built without the heap or stdio.
class line {
public:
  line& operator<<(const char* s) {
    while (*s != '\0' && size_ < sizeof(buf_) - 1)
      buf_[size_++] = *s++;
    return *this;
  }
  line& dec(std::uintmax_t v) { return digits(v, 10); }
  line& hex(std::uintmax_t v) {
    *this << "0x";
    return digits(v, 16);
  }
  void write_out() {
    buf_[size_++] = '\n';
    const char* p = buf_;
    std::size_t left = size_;
    while (left > 0) {
      ssize_t n = ::write(STDERR_FILENO, p, left);
      if (n <= 0) return;
      p += n;
      left -= static_cast<std::size_t>(n);
    }
  }

private:
  line& digits(std::uintmax_t v, unsigned base) {
    char tmp[32];
    int n = 0;
    do {
      tmp[n++] = "0123456789abcdef"[v % base];
      v /= base;
    } while (v != 0);
    while (n > 0 && size_ < sizeof(buf_) - 1)
      buf_[size_++] = tmp[--n];
    return *this;
  }
  char buf_[1024];
  std::size_t size_ = 0;
};

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

// The instruction that faulted, where the machine is known; 0 elsewhere.
std::uintptr_t fault_pc(void* context) {
  auto* uc = static_cast<ucontext_t*>(context);
#if defined(__x86_64__)
  return static_cast<std::uintptr_t>(uc->uc_mcontext.gregs[REG_RIP]);
#elif defined(__aarch64__)
  return static_cast<std::uintptr_t>(uc->uc_mcontext.pc);
#else
  (void)uc;
  return 0;
#endif
}

constexpr int fatal_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
constexpr int max_frames = 64;

void report(int sig, siginfo_t* info, void* context) {
  const auto pid = static_cast<std::uintmax_t>(::getpid());
  line head;
  head << "ddp crash report: pid ";
  head.dec(pid) << ", thread ";
  head.dec(static_cast<std::uintmax_t>(::syscall(SYS_gettid))) << ": " << signal_name(sig);
  const bool faulted = sig != SIGABRT && info != nullptr && info->si_code > 0; // sent by the kernel
  if (faulted) {
    head << " (address ";
    head.hex(reinterpret_cast<std::uintptr_t>(info->si_addr));
    if (const char* what = code_name(sig, info->si_code)) head << ", " << what;
    head << ")";
  }
  head.write_out();

  void* frames[max_frames];
  const int n = ::backtrace(frames, max_frames);
  const std::uintptr_t pc = faulted ? fault_pc(context) : 0;
  Dl_info self{}; // this library: its own frames (this handler) are not shown
  ::dladdr(reinterpret_cast<void*>(&report), &self);
  std::uintmax_t shown = 0;
  for (int i = 0; i < n; ++i) {
    const auto addr = reinterpret_cast<std::uintptr_t>(frames[i]);
    Dl_info where{};
    const bool known =
        ::dladdr(frames[i], &where) != 0 && where.dli_fname != nullptr && where.dli_fname[0] != '\0';
    if (known && where.dli_fbase == self.dli_fbase) continue;
    line frame;
    frame << "ddp crash report: pid ";
    frame.dec(pid) << ":  #";
    frame.dec(shown++) << " ";
    if (known) {
      frame << where.dli_fname << "+";
      frame.hex(addr - reinterpret_cast<std::uintptr_t>(where.dli_fbase));
      if (where.dli_sname != nullptr) {
        frame << " (" << where.dli_sname << "+";
        frame.hex(addr - reinterpret_cast<std::uintptr_t>(where.dli_saddr)) << ")";
      }
    } else {
      frame << "?+";
      frame.hex(addr);
    }
    if (pc != 0 && addr == pc) frame << " fault";
    frame.write_out();
  }
  if (n == max_frames) {
    line more;
    more << "ddp crash report: pid ";
    more.dec(pid) << ": (deeper frames not shown)";
    more.write_out();
  }
}

void on_fatal_signal(int sig, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  report(sig, info, context);
  errno = saved_errno;
  // SA_RESETHAND restored the default action on entry. The signal is blocked while this runs:
  // raised again, it ends the process as soon as this returns (a fault would also recur).
  ::raise(sig);
}

// Each thread that overflows its stack would need a stack of its own to report on; the main
// thread gets one, the others die of SIGSEGV unreported.
alignas(16) char alternate_stack[64 * 1024];

__attribute__((constructor)) void install_crash_report() {
  const char* setting = std::getenv("DDP_CRASH_REPORT");
  if (setting != nullptr && std::strcmp(setting, "0") == 0) return;
  void* warm[1];
  ::backtrace(warm, 1); // loads the unwinder now, not inside a handler

  stack_t stack{};
  stack.ss_sp = alternate_stack;
  stack.ss_size = sizeof(alternate_stack);
  ::sigaltstack(&stack, nullptr);

  struct sigaction action {};
  action.sa_sigaction = on_fatal_signal;
  action.sa_flags = SA_SIGINFO | SA_RESETHAND | SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  for (int sig : fatal_signals) {
    struct sigaction before {};
    // A program started with a signal ignored, or one a loader-time library already handles,
    // keeps what it has.
    if (::sigaction(sig, nullptr, &before) == 0 && before.sa_handler == SIG_DFL)
      ::sigaction(sig, &action, nullptr);
  }
}

} // namespace
