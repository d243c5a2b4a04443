// tools/crash_report: one line of a report, built without the heap or stdio (a signal handler
// may call neither) and written with one write(2).
#ifndef DDP_CRASH_REPORT_LINE_HPP
#define DDP_CRASH_REPORT_LINE_HPP

#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>

#include <cstddef>
#include <cstdint>

namespace ddp_crash_report {

// A line built without the heap or stdio: short text (numbers, words) is copied into a small
// buffer, a long string that outlives the line (a module's path, up to PATH_MAX) is pointed to,
// and write_out() sends the pieces with one writev(2). Small, because a handler may run on a
// thread with a small stack: a 4.6 KiB buffer here made a hang report die of SIGSEGV on a thread
// with a 24 KiB stack (a reviewer's probe).
class line {
public:
  line& operator<<(const char* s) {
    while (*s != '\0' && used_ < sizeof(buf_) - 1) // one byte kept for the newline
      buf_[used_++] = *s++;
    return *this;
  }
  line& long_text(const char* s) {
    end_text();
    std::size_t n = 0;
    while (s[n] != '\0')
      ++n;
    if (parts_count_ < max_parts - 1) parts_[parts_count_++] = {const_cast<char*>(s), n};
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
    buf_[used_++] = '\n';
    end_text();
    iovec* v = parts_;
    int n = parts_count_;
    while (n > 0) {
      const ssize_t wrote = ::writev(STDERR_FILENO, v, n);
      if (wrote < 0 && errno == EINTR) continue;
      if (wrote <= 0) return;
      auto done = static_cast<std::size_t>(wrote);
      while (n > 0 && done >= v->iov_len) {
        done -= v->iov_len;
        ++v;
        --n;
      }
      if (n > 0) {
        v->iov_base = static_cast<char*>(v->iov_base) + done;
        v->iov_len -= done;
      }
    }
  }

private:
  static constexpr int max_parts = 8;
  // The copied text since the last long string becomes a piece of its own.
  void end_text() {
    if (used_ > text_start_ && parts_count_ < max_parts)
      parts_[parts_count_++] = {buf_ + text_start_, used_ - text_start_};
    text_start_ = used_;
  }
  line& digits(std::uintmax_t v, unsigned base) {
    char tmp[32];
    int n = 0;
    do {
      tmp[n++] = "0123456789abcdef"[v % base];
      v /= base;
    } while (v != 0);
    while (n > 0 && used_ < sizeof(buf_) - 1)
      buf_[used_++] = tmp[--n];
    return *this;
  }
  char buf_[256]; // the longest copied text, a signal's head line, is under 200 bytes
  std::size_t used_ = 0, text_start_ = 0;
  iovec parts_[max_parts];
  int parts_count_ = 0;
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
