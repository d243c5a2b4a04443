// libddp_crash_report.so: preloaded (LD_PRELOAD) into a program and every process it starts,
// it prints where a process died when a fatal signal ends it (SIGSEGV, SIGBUS, SIGFPE, SIGILL,
// SIGABRT: abort(), a failed assert, an uncaught exception), then lets the same signal end it,
// so a launcher sees the same death. glibc 2.35 removed libSegFault, which did this.
//
// Why ddp has it: the lent GPU machine has no debugger and holds a session for 15 minutes
// (../shared/FACTS.md); the last time DDP ran there on device gradients it died of SIGSEGV, and
// the exit status alone said nothing of where. scripts/gpu-check preloads this into every
// program of ours it runs, and `ddprun --crash-report` into the ranks; scripts/symbolize-crash
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
#include <dlfcn.h>
#include <elf.h>
#include <execinfo.h>
#include <link.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include <atomic>
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
  line& hex_byte(unsigned char b) {
    const char* d = "0123456789abcdef";
    const char two[3] = {d[b >> 4], d[b & 15], '\0'};
    return *this << two;
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
  char buf_[4608]; // a path of PATH_MAX (4096) and what goes around it: an address is never cut
  std::size_t size_ = 0;
};

line& start_line(line& l) {
  l << "ddp crash report: pid ";
  return l.dec(static_cast<std::uintmax_t>(::getpid()));
}

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

#if defined(__x86_64__) || defined(__aarch64__)
constexpr bool registers_readable = true;
#else
constexpr bool registers_readable = false; // no fault frame marked, no bad-call caller found
#endif

// The instruction that faulted, and the return address a call through a bad function pointer
// left (x86-64: on top of the stack; aarch64: in the link register); 0 where unknown.
std::uintptr_t fault_pc(const ucontext_t* uc) {
#if defined(__x86_64__)
  return static_cast<std::uintptr_t>(uc->uc_mcontext.gregs[REG_RIP]);
#elif defined(__aarch64__)
  return static_cast<std::uintptr_t>(uc->uc_mcontext.pc);
#else
  (void)uc;
  return 0;
#endif
}
std::uintptr_t caller_of_bad_call(const ucontext_t* uc) {
#if defined(__x86_64__)
  const auto sp = static_cast<std::uintptr_t>(uc->uc_mcontext.gregs[REG_RSP]);
  return sp != 0 && sp % sizeof(std::uintptr_t) == 0 ? *reinterpret_cast<const std::uintptr_t*>(sp) : 0;
#elif defined(__aarch64__)
  return static_cast<std::uintptr_t>(uc->uc_mcontext.regs[30]);
#else
  (void)uc;
  return 0;
#endif
}

using find_object_fn = int (*)(void*, dl_find_object*);
find_object_fn find_object = nullptr; // glibc >= 2.35 (looked up at load: older ones lack it)
char exe_path[4096];                  // the main program's file (its link map's name is "")
std::uintptr_t own_bias = 0;          // this library's: its frames (the handler) are not shown
bool own_bias_known = false;

// The end of a loaded file's last segment, from its program headers (mapped at `start`); 0 when
// they do not look like a loader's. For the dladdr fallback, which gives no extent.
std::uintptr_t loaded_end(std::uintptr_t start, std::uintptr_t bias) {
  if (start == 0) return 0;
  const auto* eh = reinterpret_cast<const ElfW(Ehdr)*>(start);
  if (std::memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_phentsize != sizeof(ElfW(Phdr))) return 0;
  std::uintptr_t end = 0;
  for (std::size_t i = 0; i < eh->e_phnum; ++i) {
    const auto* p = reinterpret_cast<const ElfW(Phdr)*>(start + eh->e_phoff + i * sizeof(ElfW(Phdr)));
    if (p->p_type == PT_LOAD && bias + p->p_vaddr + p->p_memsz > end) end = bias + p->p_vaddr + p->p_memsz;
  }
  return end;
}

// The loaded file that holds an address.
struct module {
  bool found = false;
  const char* path = "?";
  std::uintptr_t bias = 0;      // the link map's l_addr: address - bias = ELF virtual address
  std::uintptr_t map_start = 0; // its mapped extent, where known (build ID lookup)
  std::uintptr_t map_end = 0;
};

module module_of(std::uintptr_t addr) {
  module m;
  link_map* map = nullptr;
  if (find_object != nullptr) {
    dl_find_object found{};
    if (find_object(reinterpret_cast<void*>(addr), &found) != 0) return m;
    map = found.dlfo_link_map;
    m.map_start = reinterpret_cast<std::uintptr_t>(found.dlfo_map_start);
    m.map_end = reinterpret_cast<std::uintptr_t>(found.dlfo_map_end);
  } else {
    Dl_info info{};
    void* extra = nullptr;
    if (::dladdr1(reinterpret_cast<void*>(addr), &info, &extra, RTLD_DL_LINKMAP) == 0) return m;
    map = static_cast<link_map*>(extra);
    m.map_start = reinterpret_cast<std::uintptr_t>(info.dli_fbase); // where its ELF header is mapped
    if (map != nullptr) m.map_end = loaded_end(m.map_start, static_cast<std::uintptr_t>(map->l_addr));
  }
  if (map == nullptr) return m;
  m.found = true;
  m.bias = static_cast<std::uintptr_t>(map->l_addr);
  if (map->l_name != nullptr && map->l_name[0] != '\0')
    m.path = map->l_name;
  else if (exe_path[0] != '\0')
    m.path = exe_path;
  return m;
}

std::uintptr_t align4(std::uintptr_t v) { return (v + 3) & ~std::uintptr_t{3}; }

// Appends the module's GNU build ID (its PT_NOTE, read in memory, bounds checked against the
// mapping) to `out`; false when it has none or its headers are not where a loader puts them.
bool append_build_id(const module& m, line& out) {
  const std::uintptr_t start = m.map_start, end = m.map_end;
  if (start == 0 || end <= start || end - start < sizeof(ElfW(Ehdr))) return false;
  const auto* eh = reinterpret_cast<const ElfW(Ehdr)*>(start);
  if (std::memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_phentsize != sizeof(ElfW(Phdr))) return false;
  const std::uintptr_t ph = start + eh->e_phoff;
  if (eh->e_phoff > end - start || eh->e_phnum * sizeof(ElfW(Phdr)) > end - ph) return false;
  for (std::size_t i = 0; i < eh->e_phnum; ++i) {
    const auto* p = reinterpret_cast<const ElfW(Phdr)*>(ph + i * sizeof(ElfW(Phdr)));
    if (p->p_type != PT_NOTE) continue;
    std::uintptr_t n = m.bias + p->p_vaddr;
    const std::uintptr_t notes_end = n + p->p_memsz;
    if (n < start || notes_end > end || notes_end < n) continue;
    while (notes_end - n >= sizeof(ElfW(Nhdr))) {
      const auto* nh = reinterpret_cast<const ElfW(Nhdr)*>(n);
      const std::uintptr_t name = n + sizeof(ElfW(Nhdr));
      const std::uintptr_t desc = align4(name + nh->n_namesz);
      const std::uintptr_t next = align4(desc + nh->n_descsz);
      if (next > notes_end || next <= n) break;
      if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 &&
          std::memcmp(reinterpret_cast<const void*>(name), "GNU", 4) == 0) {
        for (std::size_t b = 0; b < nh->n_descsz; ++b)
          out.hex_byte(reinterpret_cast<const unsigned char*>(desc)[b]);
        return true;
      }
      n = next;
    }
  }
  return false;
}

constexpr int fatal_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
constexpr int max_frames = 64;

// The modules the frames named, each listed once with its build ID after the frames.
struct seen_modules {
  module list[max_frames + 1];
  int count = 0;
  void add(const module& m) {
    for (int i = 0; i < count; ++i)
      if (list[i].bias == m.bias && list[i].path == m.path) return;
    if (count < max_frames + 1) list[count++] = m;
  }
};
seen_modules seen; // static: a handler's stack may be the 64 KiB alternate one

void print_frame(std::uintmax_t index, std::uintptr_t addr, const char* note) {
  line frame;
  start_line(frame) << ":  #";
  frame.dec(index) << " ";
  const module m = module_of(addr);
  if (m.found) {
    frame << m.path << "+";
    frame.hex(addr - m.bias);
    seen.add(m);
  } else {
    frame << "?+";
    frame.hex(addr);
  }
  frame << note;
  frame.write_out();
}

void report(int sig, siginfo_t* info, const ucontext_t* context) {
  line head;
  start_line(head) << ", thread ";
  head.dec(static_cast<std::uintmax_t>(::syscall(SYS_gettid))) << ": " << signal_name(sig);
  const bool faulted = sig != SIGABRT && info != nullptr && info->si_code > 0; // sent by the kernel
  if (faulted && info->si_code == SI_KERNEL) {
    head << " (address unknown: a general protection fault, e.g. a non-canonical pointer)";
  } else if (faulted) {
    head << " (address ";
    head.hex(reinterpret_cast<std::uintptr_t>(info->si_addr));
    if (const char* what = code_name(sig, info->si_code)) head << ", " << what;
    head << ")";
  }
  head.write_out();

  void* frames[max_frames];
  const int n = ::backtrace(frames, max_frames);
  // The instruction the signal stopped at: the faulting one, or (a signal sent by kill, timeout
  // or abort) the one about to run. Its frame is marked, so the symbolizer takes the address as
  // it is, not as a return address (0 is a real answer: a call through a null function pointer).
  const bool pc_known = registers_readable && context != nullptr;
  const std::uintptr_t pc = pc_known ? fault_pc(context) : 0;
  const char* pc_note = faulted ? " fault" : " interrupted";
  std::uintmax_t shown = 0;
  for (int i = 0; i < n; ++i) {
    const auto addr = reinterpret_cast<std::uintptr_t>(frames[i]);
    const module m = module_of(addr);
    if (own_bias_known && m.found && m.bias == own_bias) continue;
    print_frame(shown++, addr, pc_known && addr == pc ? pc_note : "");
  }
  // A call through a null or stale function pointer faults where no code is: the unwinder
  // stops at the signal frame, but the call left its return address.
  if (pc_known && faulted && !module_of(pc).found) {
    line bad;
    start_line(bad) << ":  the fault is at ";
    bad.hex(pc) << ", outside any loaded file: a call through a bad function pointer? Its caller:";
    bad.write_out();
    if (const std::uintptr_t ret = caller_of_bad_call(context); ret != 0) print_frame(shown++, ret, "");
  }
  if (n == max_frames) {
    line more;
    start_line(more) << ": (deeper frames not shown)";
    more.write_out();
  }
  for (int i = 0; i < seen.count; ++i) {
    line id;
    start_line(id) << ": module " << seen.list[i].path << " build-id ";
    if (append_build_id(seen.list[i], id)) id.write_out();
  }
}

// The thread printing its report (0: none). Threads that die meanwhile wait for it: their
// lines would interleave with its own, and the first death is the one to explain. Its re-raise
// ends the process, waiting threads included; if it is stuck (a standard error nobody reads),
// a waiting thread ends the process itself after 10 s.
std::atomic<pid_t> reporting_thread{0};
static_assert(std::atomic<pid_t>::is_always_lock_free, "a lock-free atomic is async-signal-safe");
constexpr int wait_for_report_ms = 10000;

void on_fatal_signal(int sig, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  const auto self = static_cast<pid_t>(::syscall(SYS_gettid));
  pid_t owner = 0;
  if (reporting_thread.compare_exchange_strong(owner, self)) {
    report(sig, info, static_cast<const ucontext_t*>(context));
  } else if (owner != self) {
    for (int waited = 0; waited < wait_for_report_ms; waited += 10) {
      const timespec tick{0, 10 * 1000 * 1000};
      ::nanosleep(&tick, nullptr);
    }
  }
  errno = saved_errno;
  // The default action, then the signal again: blocked while this runs, it ends the process as
  // soon as the handler returns (a fault would also recur). Set here: a handler the program
  // installed later may be calling this one, and is still installed.
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  sigemptyset(&default_action.sa_mask);
  ::sigaction(sig, &default_action, nullptr);
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
  for (int sig : fatal_signals) {
    struct sigaction before {};
    // A program started with a signal ignored, or one a loader-time library already handles,
    // keeps what it has.
    if (::sigaction(sig, nullptr, &before) == 0 && before.sa_handler == SIG_DFL)
      ::sigaction(sig, &action, nullptr);
  }
}

} // namespace
