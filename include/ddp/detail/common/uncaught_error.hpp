// An uncaught ddp::error ends its rank as an error, not as a crash: one line
// "ddp: rank R: <what()>" on stderr, a failure note for ddprun's summary
// (failure_note.hpp), and exit status uncaught_error_exit_code, where the
// C++ runtime's default printed "terminate called after throwing an instance
// of 'ddp::v0_1_0::error'" and raised SIGABRT. Any other exception, or a
// terminate with none, goes to the handler that was installed before.
#ifndef DDP_DETAIL_COMMON_UNCAUGHT_ERROR_HPP
#define DDP_DETAIL_COMMON_UNCAUGHT_ERROR_HPP

#include <ddp/detail/common/failure_note.hpp>
#include <ddp/detail/common/message.hpp>
#include <ddp/error.hpp>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <string>
#include <string_view>

DDP_BEGIN_NAMESPACE
namespace detail {

/// This process's rank for the line and the note (the first group's).
inline std::atomic<int> uncaught_error_rank{-1};
inline std::terminate_handler uncaught_error_previous = nullptr;

/// `e`'s message without a leading "rank R: " of this rank's own (the line names it).
inline std::string_view uncaught_error_message(const error& e, int rank) {
  const std::string self = detail::message({"rank ", rank, ": "});
  std::string_view message = e.message();
  if (message.starts_with(self)) message.remove_prefix(self.size());
  return message;
}

[[noreturn]] inline void on_terminate() noexcept {
  if (auto current = std::current_exception()) {
    try {
      std::rethrow_exception(current);
    } catch (const error& e) {
      const int rank = uncaught_error_rank.load();
      try {
        const auto message = uncaught_error_message(e, rank);
        const std::string line = detail::message(
            {"ddp: rank ", rank, ": ddp ", to_string(e.kind()), " error: ", message,
             " (an uncaught ddp::error: the rank exits with code ", uncaught_error_exit_code, ")\n"});
        std::fflush(stdout);                              // what the rank printed before comes first
        std::fwrite(line.data(), 1, line.size(), stderr); // one write: lines do not interleave
        note_failure_for_launcher(rank, message);
      } catch (...) {}
      // Not exit(): static destructors would run while ddp's threads still use what they destroy.
      std::_Exit(uncaught_error_exit_code);
    } catch (...) {}
  }
  if (uncaught_error_previous) uncaught_error_previous();
  std::abort();
}

/// Installs on_terminate once per process; `rank`: this process's rank, for its line.
inline void install_uncaught_error_handler(int rank) {
  static std::once_flag once;
  std::call_once(once, [rank] {
    uncaught_error_rank = rank;
    uncaught_error_previous = std::set_terminate(on_terminate);
  });
}

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_COMMON_UNCAUGHT_ERROR_HPP
