// tools/crash_report: the process's threads and a clock, with async-signal-safe calls only.
#ifndef DDP_CRASH_REPORT_THREADS_HPP
#define DDP_CRASH_REPORT_THREADS_HPP

#include <fcntl.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

namespace ddp_crash_report {

inline std::int64_t monotonic_ns() {
  timespec t{};
  ::clock_gettime(CLOCK_MONOTONIC, &t);
  return std::int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec;
}

// The process's threads (up to `cap`), from /proc/self/task with the raw getdents64 system call:
// opendir allocates, open and getdents64 do not.
inline int list_threads(pid_t* out, int cap) {
  const int fd = ::open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return 0;
  int count = 0;
  alignas(8) char buf[4096];
  for (;;) {
    const long got = ::syscall(SYS_getdents64, fd, buf, sizeof(buf));
    if (got <= 0) break;
    for (long at = 0; at < got;) {
      // struct linux_dirent64: inode (8 bytes), offset (8), record length (2), type (1), name
      unsigned short reclen = 0;
      std::memcpy(&reclen, buf + at + 16, sizeof(reclen));
      const char* name = buf + at + 19;
      pid_t tid = 0;
      bool number = *name != '\0';
      for (const char* c = name; *c != '\0'; ++c) {
        if (*c < '0' || *c > '9') number = false;
        tid = tid * 10 + (*c - '0');
      }
      if (number && count < cap) out[count++] = tid;
      if (reclen == 0) break;
      at += reclen;
    }
  }
  ::close(fd);
  return count;
}

} // namespace ddp_crash_report

#endif // DDP_CRASH_REPORT_THREADS_HPP
