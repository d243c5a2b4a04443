// Loaded by `crash_victim dlopen_lock` on a thread of its own: its initializer runs while the
// loader holds its lock, says so (a byte on the descriptor CRASH_VICTIM_READY_FD names), then
// keeps the lock 30 s. A crash report that took that lock (dladdr does) would wait as long.
#include <unistd.h>

#include <cstdlib>

namespace {
__attribute__((constructor)) void hold_the_loader_lock() {
  if (const char* fd = std::getenv("CRASH_VICTIM_READY_FD")) {
    const char byte = 1;
    [[maybe_unused]] auto w = ::write(std::atoi(fd), &byte, 1);
  }
  ::sleep(30);
}
} // namespace
