// A program that dies on purpose, for tools.crash_report (tests/tools/crash_report.py):
//   crash_victim segv | thread | abort | raise | ok | rank1_segv
// noipa: the compiler may neither inline these nor see through them, so the frames the test
// expects exist and the null write stays a write (not a trap the optimizer put in its place).
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <thread>

namespace {

int* volatile target = nullptr; // read at run time: the write below is not provably a null write

[[gnu::noipa]] void crash_victim_null_write() {
  *target = 42; // crash_victim: the faulting line
}

[[gnu::noipa]] void crash_victim_throw() { throw std::runtime_error("crash_victim: thrown on purpose"); }

[[gnu::noipa]] void crash_victim_caller() { crash_victim_null_write(); }

} // namespace

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "";
  if (std::strcmp(mode, "segv") == 0) crash_victim_caller();
  if (std::strcmp(mode, "thread") == 0) std::thread(crash_victim_caller).join();
  if (std::strcmp(mode, "abort") == 0) crash_victim_throw();
  if (std::strcmp(mode, "raise") == 0) {
    std::raise(SIGSEGV); // sent, not a fault: nothing would recur if the handler just returned
    return 3;
  }
  if (std::strcmp(mode, "ok") == 0) return 0;
  if (std::strcmp(mode, "rank1_segv") == 0) {
    const char* rank = std::getenv("RANK");
    if (rank != nullptr && std::strcmp(rank, "1") == 0) crash_victim_caller();
    std::this_thread::sleep_for(std::chrono::seconds(60)); // the launcher ends this rank first
    return 0;
  }
  std::fprintf(stderr, "crash_victim: mode must be segv, thread, abort, raise, ok or rank1_segv (got '%s')\n",
               mode);
  return 2;
}
