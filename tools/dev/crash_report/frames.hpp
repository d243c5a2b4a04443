// tools/crash_report: the calling thread's frames as report lines, and the modules they named.
#ifndef DDP_CRASH_REPORT_FRAMES_HPP
#define DDP_CRASH_REPORT_FRAMES_HPP

#include "line.hpp"
#include "modules.hpp"

#include <execinfo.h>
#include <signal.h>
#include <ucontext.h>

#include <cstdint>

namespace ddp_crash_report {

#if defined(__x86_64__) || defined(__aarch64__)
constexpr bool registers_readable = true;
#else
constexpr bool registers_readable = false; // no fault frame marked, no bad-call caller found
#endif

// The instruction that faulted, and the return address a call through a bad function pointer
// left (x86-64: on top of the stack; aarch64: in the link register); 0 where unknown.
inline std::uintptr_t fault_pc(const ucontext_t* uc) {
#if defined(__x86_64__)
  return static_cast<std::uintptr_t>(uc->uc_mcontext.gregs[REG_RIP]);
#elif defined(__aarch64__)
  return static_cast<std::uintptr_t>(uc->uc_mcontext.pc);
#else
  (void)uc;
  return 0;
#endif
}
inline std::uintptr_t caller_of_bad_call(const ucontext_t* uc) {
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

constexpr int max_frames = 64;

// The modules the frames named (of every thread, for SIGQUIT), each listed once with its build
// ID after the frames.
struct seen_modules {
  module list[256];
  int count = 0;
  void add(const module& m) {
    for (int i = 0; i < count; ++i)
      if (list[i].bias == m.bias && list[i].path == m.path) return;
    if (count < static_cast<int>(sizeof(list) / sizeof(list[0]))) list[count++] = m;
  }
};
inline seen_modules seen; // static: a handler's stack may be the 64 KiB alternate one

inline void print_frame(std::uintmax_t index, std::uintptr_t addr, const char* note) {
  line frame;
  start_line(frame) << ":  #";
  frame.dec(index) << " ";
  const module m = module_of(addr);
  if (m.found) {
    frame.long_text(m.path) << "+";
    frame.hex(addr - m.bias);
    seen.add(m);
  } else {
    frame << "?+";
    frame.hex(addr);
  }
  frame << note;
  frame.write_out();
}

// The calling thread's frames (without this library's), the one the signal stopped marked.
inline void print_frames(const ucontext_t* context, bool faulted) {
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
}

inline void print_modules() {
  for (int i = 0; i < seen.count; ++i) {
    line id;
    start_line(id) << ": module ";
    id.long_text(seen.list[i].path) << " build-id ";
    if (append_build_id(seen.list[i], id)) id.write_out();
  }
}

} // namespace ddp_crash_report

#endif // DDP_CRASH_REPORT_FRAMES_HPP
