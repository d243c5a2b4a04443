// ddp::no_sync_guard: while it lives, distributed_data_parallel lets gradients
// accumulate locally (PyTorch's no_sync()). Guards nest.
#ifndef DDP_DATA_PARALLEL_NO_SYNC_HPP
#define DDP_DATA_PARALLEL_NO_SYNC_HPP

#include <ddp/config.hpp>

#include <utility>

DDP_BEGIN_NAMESPACE

template <class Model, class Backend, class Bucketing, class Reduction> class distributed_data_parallel;
template <class Model, class Backend, class Bucketing, class Reduction> class sharded_data_parallel;

class no_sync_guard {
public:
  /// Same as dp.no_sync(): refused in the middle of a step.
  template <class DataParallel>
  requires requires(DataParallel& d) { d.no_sync(); }
  explicit no_sync_guard(DataParallel& dp) : no_sync_guard(dp.no_sync()) {}
  no_sync_guard(no_sync_guard&& o) noexcept : depth_(std::exchange(o.depth_, nullptr)) {}
  no_sync_guard(const no_sync_guard&) = delete;
  no_sync_guard& operator=(const no_sync_guard&) = delete;
  no_sync_guard& operator=(no_sync_guard&&) = delete;
  ~no_sync_guard() {
    if (depth_) --*depth_;
  }

private:
  template <class, class, class, class> friend class distributed_data_parallel;
  template <class, class, class, class> friend class sharded_data_parallel;
  explicit no_sync_guard(int& depth) : depth_(&depth) { ++*depth_; }

  int* depth_;
};

DDP_END_NAMESPACE

#endif // DDP_DATA_PARALLEL_NO_SYNC_HPP
