// ddp::step_batches — a distributed_sampler's batches numbered by global step,
// for trainers that count steps rather than epochs (language models, llm.c).
// Step s is batch s % steps_per_epoch() of epoch s / steps_per_epoch(): the
// view calls the sampler's set_epoch itself, so every epoch is the one an
// epoch loop over ddp::batches (and PyTorch's DistributedSampler) would give,
// and resuming at step k needs nothing but k. Needs neither Gloo nor NCCL.
#ifndef DDP_STEP_BATCHES_HPP
#define DDP_STEP_BATCHES_HPP

#include <ddp/detail/common/message.hpp>
#include <ddp/error.hpp>
#include <ddp/sampler.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <span>
#include <string>

DDP_BEGIN_NAMESPACE

/// One step's batch: which step, which epoch, and this rank's sample indices.
struct step_batch {
  std::uint64_t step = 0;
  std::uint64_t epoch = 0;
  std::span<const std::int64_t> indices;
};

template <sampling_policy Policy> class step_batches {
public:
  /// Batches of `batch_size` of the sampler's indices, as ddp::batches cuts
  /// each epoch: the last batch of an epoch is short unless drop_last. The
  /// view keeps a reference to `sampler` and sets its epoch.
  step_batches(distributed_sampler<Policy>& sampler, std::size_t batch_size, bool drop_last = false)
      : sampler_(&sampler), batch_(batch_size) {
    if (batch_size == 0)
      detail::throw_error(error_kind::config, {"step_batches: batch_size must be at least 1"});
    const std::size_t n = sampler.size();
    steps_per_epoch_ = drop_last ? n / batch_size : (n + batch_size - 1) / batch_size;
    if (steps_per_epoch_ == 0)
      detail::throw_error(error_kind::config,
                          {"step_batches: an epoch has no batch (this rank's share is ", n,
                           " samples, batch_size ", batch_size, (drop_last ? " with drop_last" : ""),
                           "): use a smaller batch or more data"});
  }

  /// Batches per epoch (the same every epoch).
  std::size_t steps_per_epoch() const noexcept { return steps_per_epoch_; }
  std::uint64_t epoch_of(std::uint64_t step) const noexcept { return step / steps_per_epoch_; }

  /// This rank's indices for global step `step` (sets the sampler's epoch).
  /// The span lies in the sampler's index list: valid until the sampler moves to another epoch.
  std::span<const std::int64_t> at(std::uint64_t step) const {
    sampler_->set_epoch(epoch_of(step));
    const auto all = sampler_->indices();
    const std::size_t first = static_cast<std::size_t>(step % steps_per_epoch_) * batch_;
    return all.subspan(first, std::min(batch_, all.size() - first));
  }

  class iterator {
  public:
    using value_type = step_batch;
    using difference_type = std::ptrdiff_t;
    iterator() = default;
    iterator(const step_batches* view, std::uint64_t step) : view_(view), step_(step) {}
    value_type operator*() const { return {step_, view_->epoch_of(step_), view_->at(step_)}; }
    iterator& operator++() {
      ++step_;
      return *this;
    }
    iterator operator++(int) {
      auto t = *this;
      ++*this;
      return t;
    }
    bool operator==(const iterator& o) const { return step_ == o.step_; }

  private:
    const step_batches* view_ = nullptr;
    std::uint64_t step_ = 0;
  };

  /// Every step from first() on, without end: stop at your step count
  /// (or `| std::views::take(n)`).
  iterator begin() const { return {this, first_}; }
  std::unreachable_sentinel_t end() const noexcept { return {}; }
  std::uint64_t first() const noexcept { return first_; }

  /// The same view from step `step` on: resuming a run at step k yields what
  /// the run would have seen from k on.
  step_batches from(std::uint64_t step) const {
    step_batches r = *this;
    r.first_ = step;
    return r;
  }

private:
  distributed_sampler<Policy>* sampler_;
  std::size_t batch_;
  std::size_t steps_per_epoch_ = 0;
  std::uint64_t first_ = 0;
};

DDP_END_NAMESPACE

#endif // DDP_STEP_BATCHES_HPP
