// tools/crash_report: the process's threads and a clock, with async-signal-safe calls only.
#ifndef DDP_CRASH_REPORT_THREADS_HPP
#define DDP_CRASH_REPORT_THREADS_HPP

#include <fcntl.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace ddp_crash_report {

inline std::int64_t monotonic_ns() {
  timespec t{};
  ::clock_gettime(CLOCK_MONOTONIC, &t);
  return std::int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec;
}

inline void wait_ms(int ms) {
  const timespec tick{0, ms * 1000L * 1000L};
  ::nanosleep(&tick, nullptr);
}

// The process's threads (up to `cap`), from /proc/self/task with the raw getdents64 system call:
// opendir allocates, open and getdents64 do not.
inline int list_threads(pid_t* out, int cap) {
  const int fd = ::open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return 0;
  int count = 0;
  alignas(8) static char buf[4096]; // static: the caller's stack may be small (one caller at a time)
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

// Whether a thread of this process blocks `sig`: the SigBlk mask in /proc/self/task/<tid>/status
// (hexadecimal, bit sig - 1). False when unreadable. Called by one thread at a time (the one
// printing a SIGQUIT dump): the buffer is static, not on a stack that may be small.
inline bool blocks_signal(pid_t thread, int sig) {
  char path[64] = "/proc/self/task/";
  std::size_t at = std::strlen(path);
  char digits[16];
  int n = 0;
  for (auto t = static_cast<unsigned long>(thread); n == 0 || t != 0; t /= 10)
    digits[n++] = static_cast<char>('0' + t % 10);
  while (n > 0)
    path[at++] = digits[--n];
  std::memcpy(path + at, "/status", sizeof("/status"));
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  static char status[4096];
  std::size_t got = 0;
  for (ssize_t r; got < sizeof(status) - 1 && (r = ::read(fd, status + got, sizeof(status) - 1 - got)) > 0;)
    got += static_cast<std::size_t>(r);
  ::close(fd);
  status[got] = '\0';
  const char* mask = std::strstr(status, "\nSigBlk:");
  if (mask == nullptr) return false;
  mask += sizeof("\nSigBlk:") - 1;
  while (*mask == ' ' || *mask == '\t')
    ++mask;
  const char* end = mask;
  while ((*end >= '0' && *end <= '9') || (*end >= 'a' && *end <= 'f'))
    ++end;
  // Bit sig - 1 counts from the right end of the hexadecimal digits.
  const int bit = sig - 1;
  const char* digit = end - 1 - bit / 4;
  if (digit < mask) return false;
  const int value = *digit <= '9' ? *digit - '0' : *digit - 'a' + 10;
  return (value >> (bit % 4) & 1) != 0;
}

} // namespace ddp_crash_report

#endif // DDP_CRASH_REPORT_THREADS_HPP
