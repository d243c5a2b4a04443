// Works whose results a stream waited for on the device (work::stream_wait)
// while the host went on: DDP's buckets and buffer broadcasts over NCCL in a
// stream-ordered synchronize(). Their failures still reach the user: a
// failure already known is thrown by the next check() (the next step), and one
// still unchecked at teardown is waited for and logged. A failed collective also poisons the
// group, so the next collective fails with it anyway; this covers the last
// step, after which there may be none.
#ifndef DDP_DETAIL_DATA_PARALLEL_UNCHECKED_WORKS_HPP
#define DDP_DETAIL_DATA_PARALLEL_UNCHECKED_WORKS_HPP

#include <ddp/detail/common/linkage.hpp>
#include <ddp/detail/common/log.hpp>
#include <ddp/error.hpp>
#include <ddp/work.hpp>

#include <algorithm>
#include <exception>
#include <optional>
#include <string>
#include <utility>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

/// On an error path or at teardown (an error is already on its way, or
/// nobody is left to tell): waits for a bucket's collective, if any, and
/// drops its failure. Both bucket engines use it.
inline void wait_quietly(std::optional<work>& in_flight) noexcept {
  if (!in_flight) return;
  try {
    in_flight->wait();
  } catch (...) {}
  in_flight.reset();
}

class unchecked_works {
public:
  explicit unchecked_works(int rank) : rank_(rank) {}
  unchecked_works(const unchecked_works&) = delete;
  unchecked_works& operator=(const unchecked_works&) = delete;
  ~unchecked_works() { log_all(); }

  void add(work w) { works_.push_back(std::move(w)); }

  /// Tracks `w`, then makes `stream` wait for it (work::stream_wait). When
  /// that throws, a finished work's failure is being thrown now, so it is
  /// forgotten (not reported twice); one not finished (stream_wait gave up
  /// waiting for it to be queued) stays, to be waited for.
  DDP_INLINE void stream_wait(const work& w, CUstream_st* stream);

  /// Forgets the finished ones; throws the first failure among them.
  DDP_INLINE void check();

  /// Waits for every one on the host (each with its deadline); throws the first failure.
  DDP_INLINE void wait_all();

  /// Waits for every one on the host (each with its deadline) and logs the
  /// failures, each distinct one once (a failed group fails them all with
  /// one error): where nobody is left to throw them to (teardown).
  DDP_INLINE void log_all() noexcept;

private:
  int rank_;
  std::vector<work> works_;
};

} // namespace detail
DDP_END_NAMESPACE

#if DDP_DETAIL_DEFINE_RUNTIME
#include <ddp/detail/data_parallel/unchecked_works-inl.hpp>
#endif

#endif // DDP_DETAIL_DATA_PARALLEL_UNCHECKED_WORKS_HPP
