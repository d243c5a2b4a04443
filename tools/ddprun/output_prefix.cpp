#include "output_prefix.hpp"

#include <cerrno>
#include <cstdio>
#include <unistd.h>

namespace ddprun {
namespace {

/// Moves complete lines of `buf` to `to`, each prefixed; with `flush`, the rest too.
void emit_lines(std::string& buf, FILE* to, const std::string& prefix, bool flush) {
  std::size_t start = 0;
  for (;;) {
    auto nl = buf.find('\n', start);
    if (nl == std::string::npos) break;
    std::string line = prefix + buf.substr(start, nl - start + 1);
    std::fwrite(line.data(), 1, line.size(), to);
    start = nl + 1;
  }
  buf.erase(0, start);
  if (flush && !buf.empty()) {
    std::string line = prefix + buf + "\n";
    std::fwrite(line.data(), 1, line.size(), to);
    buf.clear();
  }
  std::fflush(to);
}

/// Reads what is available on `fd`; closes it at EOF.
void drain(int& fd, std::string& buf, FILE* to, const std::string& prefix) {
  char tmp[65536];
  ssize_t k = ::read(fd, tmp, sizeof tmp);
  if (k > 0) {
    buf.append(tmp, static_cast<std::size_t>(k));
    emit_lines(buf, to, prefix, false);
  } else if (k == 0 || (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK)) {
    emit_lines(buf, to, prefix, true);
    ::close(fd);
    fd = -1;
  }
}

} // namespace

void pass_on_output(rank_process& r) {
  // Appended, not "[" + std::to_string(...): g++ 12 at -O3 reports a false -Wrestrict
  // inside that operator+ (GCC bug 105329), which broke Release builds under -Werror.
  std::string prefix = "[";
  prefix += std::to_string(r.rank);
  prefix += "] ";
  if (r.out >= 0) drain(r.out, r.out_buf, stdout, prefix);
  if (r.err >= 0) drain(r.err, r.err_buf, stderr, prefix);
}

} // namespace ddprun
