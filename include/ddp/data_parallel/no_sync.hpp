// ddp::no_sync_guard: while it lives, distributed_data_parallel lets gradients
// accumulate locally (PyTorch's no_sync()). Guards nest.
#ifndef DDP_DATA_PARALLEL_NO_SYNC_HPP
#define DDP_DATA_PARALLEL_NO_SYNC_HPP

#include <ddp/config.hpp>

#include <utility>

DDP_BEGIN_NAMESPACE

class no_sync_guard {
public:
  /// Prefer distributed_data_parallel::no_sync(), which checks it is not mid-step.
  explicit no_sync_guard(int& depth) : depth_(&depth) { ++*depth_; }
  no_sync_guard(no_sync_guard&& o) noexcept : depth_(std::exchange(o.depth_, nullptr)) {}
  no_sync_guard(const no_sync_guard&) = delete;
  no_sync_guard& operator=(const no_sync_guard&) = delete;
  no_sync_guard& operator=(no_sync_guard&&) = delete;
  ~no_sync_guard() {
    if (depth_) --*depth_;
  }

private:
  int* depth_;
};

DDP_END_NAMESPACE

#endif // DDP_DATA_PARALLEL_NO_SYNC_HPP
