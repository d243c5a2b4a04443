// ddp::global_batches — a global batch of fixed size G per step, whatever the
// world size: step s is batch s % steps_per_epoch() of epoch
// s / steps_per_epoch(), the global positions [j G, min((j + 1) G, n)) of the
// epoch's global order (the interleaved sampler's: PyTorch's permutation for
// `shuffled`), and this rank takes those of them the sampler gives it. The
// shares of a batch differ by at most one sample (G not a multiple of the
// world size, the epoch's short last batch, a job resumed at another size):
// pass local_samples() and global_samples() to
// distributed_data_parallel::set_samples for the exact sample-weighted mean.
// The steps, their samples and the learning-rate schedule do not depend on the
// world size, so a job resized mid-epoch (sampler.set_position) goes on along
// the same trajectory, up to float summation order. Needs neither Gloo nor NCCL.
#ifndef DDP_GLOBAL_BATCHES_HPP
#define DDP_GLOBAL_BATCHES_HPP

#include <ddp/detail/common/message.hpp>
#include <ddp/error.hpp>
#include <ddp/sampler.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

DDP_BEGIN_NAMESPACE

/// One global step's batch, as this rank sees it.
struct global_batch {
  std::uint64_t step = 0;
  std::uint64_t epoch = 0;
  std::uint64_t first = 0;               ///< global position of the batch's first sample in its epoch
  std::size_t global_size = 0;           ///< samples in the whole global batch (G, or the epoch's rest)
  std::span<const std::int64_t> indices; ///< this rank's share (may be empty)
  std::size_t local_samples() const noexcept { return indices.size(); }
  std::size_t global_samples() const noexcept { return global_size; }
};

template <sampling_policy Policy> class global_batches {
  static_assert(
      requires { Policy::interleaved; },
      "ddp: global_batches needs an interleaved sampling policy (shuffled, sequential): a global "
      "position must name the same sample at every world size");

public:
  /// Batches of `global_batch_size` samples of the whole job per step. Without
  /// drop_last an epoch's last batch is short (n % G samples); with it, it is
  /// left out. The sampler must not drop_last itself (that cut depends on the
  /// world size). The view keeps a reference to `sampler` and sets its epoch
  /// (and, to go back within an epoch, its position).
  global_batches(distributed_sampler<Policy>& sampler, std::size_t global_batch_size, bool drop_last = false)
      : sampler_(&sampler), batch_(global_batch_size) {
    const auto& c = sampler.context();
    if (global_batch_size == 0)
      detail::throw_error(error_kind::config, {"global_batches: global_batch_size must be at least 1"});
    if (c.drop_last)
      detail::throw_error(
          error_kind::config,
          {"global_batches: the sampler has drop_last, which cuts each epoch to a multiple of the world "
           "size; build it without, and pass drop_last to global_batches (it drops the short last "
           "global batch instead)"});
    n_ = c.n;
    steps_per_epoch_ = drop_last ? n_ / batch_ : (n_ + batch_ - 1) / batch_;
    if (steps_per_epoch_ == 0)
      detail::throw_error(error_kind::config,
                          {"global_batches: an epoch has no batch (", n_, " samples, global batch ", batch_,
                           (drop_last ? " with drop_last" : ""), "): use a smaller batch or more data"});
  }

  std::size_t steps_per_epoch() const noexcept { return steps_per_epoch_; }
  std::size_t global_batch_size() const noexcept { return batch_; }
  std::uint64_t epoch_of(std::uint64_t step) const noexcept { return step / steps_per_epoch_; }
  /// Samples of its epoch the whole job has consumed before `step`
  /// (training_progress::samples, distributed_sampler::set_position).
  std::uint64_t position_of(std::uint64_t step) const noexcept {
    return (step % steps_per_epoch_) * static_cast<std::uint64_t>(batch_);
  }

  /// Global step `step`: sets the sampler's epoch and cuts this rank's share
  /// from its indices (valid until the sampler moves to another epoch or position).
  global_batch at(std::uint64_t step) const {
    const std::uint64_t epoch = epoch_of(step);
    sampler_->set_epoch(epoch);
    const std::size_t a = static_cast<std::size_t>(position_of(step));
    const std::size_t b = std::min(a + batch_, n_);
    // The sampler starts at an earlier batch or at this one; a later start cannot give this batch.
    if (a < sampler_->position()) sampler_->set_position(0);
    const auto& c = sampler_->context();
    const auto all = sampler_->indices();
    // This rank holds global positions start + rank + k * world, k < size().
    const std::size_t start = c.start, r = static_cast<std::size_t>(c.rank),
                      w = static_cast<std::size_t>(c.num_replicas);
    auto first_k = [&](std::size_t pos) -> std::size_t {
      const std::size_t off = pos - start; // pos >= start
      return std::min(off > r ? (off - r + w - 1) / w : 0, all.size());
    };
    const std::size_t lo = first_k(a), hi = first_k(b);
    return {step, epoch, a, b - a, all.subspan(lo, hi - lo)};
  }

private:
  distributed_sampler<Policy>* sampler_;
  std::size_t batch_;
  std::size_t n_ = 0;
  std::size_t steps_per_epoch_ = 0;
};

DDP_END_NAMESPACE

#endif // DDP_GLOBAL_BATCHES_HPP
