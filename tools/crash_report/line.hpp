// tools/crash_report: one line of a report, built without the heap or stdio (a signal handler
// may call neither) and written with one write(2).
#ifndef DDP_CRASH_REPORT_LINE_HPP
#define DDP_CRASH_REPORT_LINE_HPP

#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>

namespace ddp_crash_report {

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

inline line& start_line(line& l) {
  l << "ddp crash report: pid ";
  return l.dec(static_cast<std::uintmax_t>(::getpid()));
}

inline pid_t this_thread() { return static_cast<pid_t>(::syscall(SYS_gettid)); }

// "ddp crash report: pid P, thread T: " and the rest.
inline line& start_thread_line(line& l, pid_t thread) {
  start_line(l) << ", thread ";
  return l.dec(static_cast<std::uintmax_t>(thread)) << ": ";
}

} // namespace ddp_crash_report

#endif // DDP_CRASH_REPORT_LINE_HPP
