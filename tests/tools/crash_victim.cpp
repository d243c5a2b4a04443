// A program that dies on purpose, for tools.crash_report (tests/tools/crash_report.py):
//   crash_victim segv | thread | threads | abort | raise | spin | hang | fpe | ill | nullfn
//   crash_victim chain | ok | rank1_segv
//   crash_victim dlopen_lock SLOW_INIT_LIBRARY
// noipa: the compiler may neither inline these nor see through them, so the frames the test
// expects exist and the null write stays a write (not a trap the optimizer put in its place).
#include <dlfcn.h>
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

int* volatile target = nullptr; // read at run time: the write below is not provably a null write
volatile int zero = 0;
void (*volatile null_function)() = nullptr;
volatile int calls_done = 0;
volatile unsigned long spins = 0;

[[gnu::noipa]] void crash_victim_null_write() {
  *target = 42; // crash_victim: the faulting line
}

[[gnu::noipa]] void crash_victim_throw() { throw std::runtime_error("crash_victim: thrown on purpose"); }

[[gnu::noipa]] void crash_victim_caller() { crash_victim_null_write(); }

[[gnu::noipa]] int crash_victim_divide(int a) { return a / zero; }

[[gnu::noipa]] void crash_victim_trap() { __builtin_trap(); }

// Runs until a signal sent from outside ends it (tools.crash_report sends SIGABRT).
[[gnu::noipa]] void crash_victim_spin() {
  std::puts("crash_victim: spinning");
  std::fflush(stdout);
  for (;;)
    spins = spins + 1; // crash_victim: the spinning line
}

// A hung program, for SIGQUIT: the main thread and a sleeper wait forever, a third thread
// blocks SIGQUIT (it cannot say where it is).
[[gnu::noipa]] void crash_victim_sleeper() {
  for (;;)
    ::pause(); // crash_victim: the sleeper's line
}
[[gnu::noipa]] void crash_victim_deaf(std::atomic<int>& started) {
  sigset_t quit;
  sigemptyset(&quit);
  sigaddset(&quit, SIGQUIT);
  pthread_sigmask(SIG_BLOCK, &quit, nullptr);
  ++started; // only now: blocked before the main thread says it hangs
  for (;;)
    ::pause();
}
[[gnu::noipa]] void crash_victim_hang() {
  ::alarm(60); // a test that never sends SIGQUIT (killed itself, say) leaves nothing running
  std::atomic<int> started{0};
  std::thread([&started] {
    ++started;
    crash_victim_sleeper();
  }).detach();
  std::thread([&started] { crash_victim_deaf(started); }).detach();
  while (started.load() < 2)
    std::this_thread::yield();
  std::puts("crash_victim: hanging");
  std::fflush(stdout);
  for (;;)
    ::pause(); // crash_victim: the main thread's line
}

// Several threads fault at the same moment: one report, whole.
void crash_on_threads_at_once() {
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&go] {
      while (!go.load()) {}
      crash_victim_caller();
    });
  go = true;
  for (auto& t : threads)
    t.join();
}

[[gnu::noipa]] void crash_victim_call_null() {
  null_function();             // crash_victim: the bad call
  calls_done = calls_done + 1; // not a tail call: the return address stays in this function
}

// A handler the program installs after the preload's, passing the signal on to it, as Go's
// and the JVM's signal forwarding do. Without one to pass to, it restores the default.
struct sigaction previous {};
void pass_on(int sig, siginfo_t* info, void* context) {
  static const char said[] = "crash_victim: the program's own handler, passing the signal on\n";
  [[maybe_unused]] auto w = ::write(STDERR_FILENO, said, sizeof(said) - 1);
  if ((previous.sa_flags & SA_SIGINFO) != 0 && previous.sa_sigaction != nullptr)
    previous.sa_sigaction(sig, info, context);
  else
    std::signal(sig, SIG_DFL);
}

// A library whose initializer holds the loader's lock for 30 s is being loaded on another
// thread (as CUDA and NCCL load theirs) when this thread crashes.
void crash_during_dlopen(const char* library) {
  int ready[2];
  if (::pipe(ready) != 0) std::exit(2);
  ::setenv("CRASH_VICTIM_READY_FD", std::to_string(ready[1]).c_str(), 1);
  std::thread([library] { ::dlopen(library, RTLD_NOW); }).detach();
  pollfd p{ready[0], POLLIN, 0};
  char byte = 0;
  if (::poll(&p, 1, 20000) != 1 || ::read(ready[0], &byte, 1) != 1) {
    std::fprintf(stderr, "crash_victim: %s did not start loading within 20 s\n", library);
    std::exit(2);
  }
  crash_victim_caller();
}

} // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "segv") crash_victim_caller();
  if (mode == "thread") std::thread(crash_victim_caller).join();
  if (mode == "abort") crash_victim_throw();
  if (mode == "raise") {
    std::raise(SIGSEGV); // sent, not a fault: nothing would recur if the handler just returned
    return 3;
  }
  if (mode == "threads") crash_on_threads_at_once();
  if (mode == "spin") crash_victim_spin();
  if (mode == "hang") crash_victim_hang();
  if (mode == "fpe") return crash_victim_divide(argc);
  if (mode == "ill") crash_victim_trap();
  if (mode == "nullfn") crash_victim_call_null();
  if (mode == "chain") {
    struct sigaction mine {};
    mine.sa_sigaction = pass_on;
    mine.sa_flags = SA_SIGINFO;
    sigemptyset(&mine.sa_mask);
    ::sigaction(SIGSEGV, &mine, &previous);
    crash_victim_caller();
  }
  if (mode == "dlopen_lock" && argc > 2) crash_during_dlopen(argv[2]);
  if (mode == "ok") return 0;
  if (mode == "rank1_segv") {
    const char* rank = std::getenv("RANK");
    if (rank != nullptr && std::strcmp(rank, "1") == 0) crash_victim_caller();
    std::this_thread::sleep_for(std::chrono::seconds(60)); // the launcher ends this rank first
    return 0;
  }
  std::fprintf(stderr, "crash_victim: unknown mode '%s' (see the source's first lines)\n", mode.c_str());
  return 2;
}
