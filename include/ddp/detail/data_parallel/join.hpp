// Uneven inputs (PyTorch's Join, with divide_by_initial_world_size): every
// step, training ranks all-reduce a "still training" flag; a rank that ran out
// of data answers those rounds with zeros until the flag reads zero.
#ifndef DDP_DETAIL_DATA_PARALLEL_JOIN_HPP
#define DDP_DETAIL_DATA_PARALLEL_JOIN_HPP

#include <ddp/backend/communicator.hpp>

#include <cstdint>

DDP_BEGIN_NAMESPACE
namespace detail {

template <communicator Comm> class join_tracker {
public:
  explicit join_tracker(Comm& comm) : comm_(comm) {}
  join_tracker(const join_tracker&) = delete;
  join_tracker& operator=(const join_tracker&) = delete;
  ~join_tracker() { end_step(); }

  /// A training rank's step begins: joined ranks are waiting on this flag.
  void begin_step() {
    flag_ = 1;
    pending_ = comm_.all_reduce(&flag_, 1, dtype::i32, op::sum, false);
  }

  /// Waits for the flag's all-reduce (its failure is the step's, reported there).
  void end_step() {
    try {
      pending_.wait();
    } catch (...) {}
    pending_ = work{};
  }

  /// A joined rank: while some rank still trains, calls shadow_step() — which
  /// must issue exactly the collectives of one training step, on zeros.
  template <class F> void shadow_until_all_joined(F&& shadow_step) {
    for (;;) {
      std::int32_t active = 0;
      comm_.all_reduce(&active, 1, dtype::i32, op::sum, true).wait();
      if (active == 0) return;
      shadow_step();
    }
  }

private:
  Comm& comm_;
  std::int32_t flag_ = 1;
  // A default work is done: waiting on it returns at once. (Not std::optional:
  // GCC 12 then warns maybe-uninitialized in ~optional, a false positive, when
  // the collectives' inlining shifts.)
  work pending_;
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_DATA_PARALLEL_JOIN_HPP
