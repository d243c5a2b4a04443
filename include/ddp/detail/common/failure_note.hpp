// Tells the launcher that this rank fails on its own, before it tells its
// peers. ddprun sets DDP_FAILURE_FILE to one file shared by its ranks; a rank
// leaving on an error of its own appends "<unix ns> <rank> <reason>" (one
// write under PIPE_BUF with O_APPEND: lines never interleave). The peers then
// fail a moment later, and may even exit first; the timestamps let ddprun
// report the rank that failed first, not the one that exited first (the idea
// of torchrun's TORCHELASTIC_ERROR_FILE).
#ifndef DDP_DETAIL_COMMON_FAILURE_NOTE_HPP
#define DDP_DETAIL_COMMON_FAILURE_NOTE_HPP

#include <ddp/detail/common/env.hpp>
#include <ddp/detail/common/message.hpp>

#include <chrono>
#include <fcntl.h>
#include <string>
#include <string_view>
#include <unistd.h>

DDP_BEGIN_NAMESPACE
namespace detail {

inline void note_failure_for_launcher(int rank, std::string_view reason) noexcept {
  try {
    auto path = getenv_str("DDP_FAILURE_FILE");
    if (!path || path->empty()) return;
    auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                  std::chrono::system_clock::now().time_since_epoch())
                  .count();
    std::string line = detail::message({ns, " ", rank, " "});
    for (char c : reason.substr(0, 400))
      line += c == '\n' ? ' ' : c;
    line += '\n';
    int fd = ::open(path->c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return;
    [[maybe_unused]] auto w = ::write(fd, line.data(), line.size());
    ::close(fd);
  } catch (...) {}
}

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_COMMON_FAILURE_NOTE_HPP
