// What distributed_data_parallel tells the timeline (DDP_TRACE, see
// ddp/detail/common/trace.hpp): gradients marked, buckets launched, waited
// for, unpacked and completed, one synchronize() per step. Kept apart from the
// reducer, as c10d keeps its timer and logger apart: the reducer calls one probe
// per point, and each probe is one predictable branch when tracing is off.
#ifndef DDP_DETAIL_DATA_PARALLEL_TIMELINE_HPP
#define DDP_DETAIL_DATA_PARALLEL_TIMELINE_HPP

#include <ddp/detail/common/trace.hpp>
#include <ddp/detail/data_parallel/bucket_plan.hpp>

#include <cstdint>
#include <optional>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

class step_timeline {
public:
  explicit step_timeline(const bucket_plan& plan) : plan_(plan), launched_ns_(plan.buckets.size(), 0) {}

  /// Room for `next`'s buckets, before the plan is replaced (may throw).
  void prepare_plan(const bucket_plan& next) { launched_ns_.reserve(next.buckets.size()); }
  /// The plan was laid out again between steps, after prepare_plan(): no allocation.
  void plan_changed() noexcept { launched_ns_.assign(plan_.buckets.size(), 0); }

  void marked(std::size_t param, bool unused) {
    trace::instant(trace::kind::mark_grad_ready, static_cast<std::int64_t>(param), unused ? 1 : 0);
  }

  /// Around the launch of bucket b: the span of the call (packing and
  /// submission), the start of "bucket in flight", and the bucket's index
  /// handed to the collective it submits.
  class launch_probe {
  public:
    launch_probe(step_timeline& t, std::size_t b) : t_(t), b_(b), start_(trace::on() ? trace::now_ns() : -1) {
      if (start_ < 0) return;
      t_.launched_ns_[b] = start_;
      trace::record(trace::kind::bucket_begin, start_, 0, index(), t_.bytes(b));
      trace::submitting_bucket = static_cast<int>(b);
    }
    launch_probe(const launch_probe&) = delete;
    launch_probe& operator=(const launch_probe&) = delete;
    ~launch_probe() {
      if (start_ < 0) return;
      trace::submitting_bucket = -1;
      trace::record(trace::kind::bucket_launch, start_, trace::now_ns() - start_, index(), t_.bytes(b_));
    }

  private:
    std::int64_t index() const { return static_cast<std::int64_t>(b_); }
    step_timeline& t_;
    std::size_t b_;
    std::int64_t start_;
  };
  launch_probe launching(std::size_t b) { return launch_probe(*this, b); }

  /// synchronize() as a whole: one step; none inside no_sync(), where it communicates nothing.
  std::optional<trace::span> synchronizing(bool communicates) {
    if (!communicates) return std::nullopt;
    return std::optional<trace::span>(std::in_place, trace::kind::synchronize, step_);
  }
  /// synchronize() blocked on bucket b's collective.
  trace::span waiting(std::size_t b) {
    return trace::span(trace::kind::wait, static_cast<std::int64_t>(b), step_);
  }
  trace::span unpacking(std::size_t b) {
    const bool packed = plan_.buckets[b].path == bucket_path::packed;
    return trace::span(trace::kind::unpack, static_cast<std::int64_t>(b), packed ? bytes(b) : 0);
  }

  /// Bucket b's gradients hold the average.
  void completed(std::size_t b) {
    if (!trace::on() || launched_ns_[b] == 0) return;
    const auto t = trace::now_ns();
    const auto i = static_cast<std::int64_t>(b);
    trace::record(trace::kind::bucket_end, t, 0, i);
    trace::record(trace::kind::bucket_complete, t, 0, i, bytes(b), t - launched_ns_[b]);
    launched_ns_[b] = 0;
  }

  /// A step (a synchronize() that communicated) ended.
  void step_done() { ++step_; }

private:
  std::int64_t bytes(std::size_t b) const {
    auto& k = plan_.buckets[b];
    return static_cast<std::int64_t>(k.elements * size_of(k.wire_type));
  }

  const bucket_plan& plan_;
  std::vector<std::int64_t> launched_ns_; ///< per bucket, 0 when not in flight (or not traced)
  std::int64_t step_ = 0;
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_DATA_PARALLEL_TIMELINE_HPP
