// A ring all-reduce over Gloo's transport that works on the gradients where
// they are: a bucket is a list of fragments (one per tensor), sent from and
// received into the tensors themselves, so nothing is packed or unpacked, and
// the averaging is fused into the last reduction step instead of a pass of
// its own. Same schedule as Gloo's ring: W-1 reduce-scatter steps, then W-1
// all-gather steps, each chunk cut at tensor boundaries and into pieces of at
// most 1 MiB (the piece size is a parameter, so tests can cross it cheaply).
#ifndef DDP_DETAIL_GLOO_RING_HPP
#define DDP_DETAIL_GLOO_RING_HPP

#include <ddp/detail/backend/fragment.hpp>
#include <ddp/detail/gloo/deadline.hpp>
#include <ddp/detail/gloo/slots.hpp>
#include <ddp/detail/gloo/waits.hpp>
#include <ddp/detail/numeric/elementwise.hpp>
#include <ddp/op.hpp>

#include <gloo/common/error.h>
#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

class fragment_ring {
public:
  /// 1 MiB, as Gloo's own ring uses for its segments.
  static constexpr std::size_t default_piece_bytes = std::size_t{1} << 20;

  /// `waits` registers the ring's buffers, so that another thread can end its waits.
  fragment_ring(const std::shared_ptr<::gloo::Context>& ctx, gloo_waits& waits,
                const std::vector<fragment>& frags, dtype dt, std::vector<char>& scratch,
                std::size_t max_piece_bytes = default_piece_bytes, op o = op::sum)
      : ctx_(ctx), waits_(waits), frags_(frags), dt_(dt), es_(size_of(dt)), max_piece_bytes_(max_piece_bytes),
        reduce_(reduce_for(dt, o)), scratch_(scratch) {
    starts_.reserve(frags_.size() + 1);
    std::size_t at = 0;
    for (auto& f : frags_) {
      starts_.push_back(at);
      at += f.count;
      bufs_.push_back(f.count ? waits_.make(*ctx_, f.data, f.count * es_)
                              : gloo_waits::buffer(nullptr, {&waits_}));
    }
    starts_.push_back(at);
    total_ = at;
  }

  /// Reduces over ranks with the op given at construction (a sum by default),
  /// then multiplies by `scale` (1/W for a mean; sums only), in place.
  void run(std::uint32_t tag, double scale, std::chrono::milliseconds timeout) {
    const int w = ctx_->size, r = ctx_->rank;
    if (total_ == 0) return;
    if (w == 1) {
      if (scale != 1.0)
        for (auto& f : frags_)
          scale_in_place(f.data, f.count, dt_, scale);
      return;
    }
    deadline_ = gloo_deadline(timeout);
    slot_ = ::gloo::Slot::build(ring_slot_prefix, tag);
    const int right = (r + 1) % w, left = (r - 1 + w) % w;
    std::size_t largest = 0;
    for (int c = 0; c < w; ++c)
      largest = std::max(largest, end(c) - begin(c));
    scratch_.resize(largest * es_);
    auto tmp = waits_.make(*ctx_, scratch_.data(), scratch_.size());
    const auto reduce = reduce_;

    for (int s = 0; s + 1 < w; ++s) { // reduce-scatter: after it, rank r owns chunk r+1
      const int send_c = (r - s + w) % w, recv_c = (r - s - 1 + w) % w;
      const bool last = s + 2 == w;
      pieces(begin(recv_c), end(recv_c), [&](std::size_t, std::size_t, std::size_t n, std::size_t at) {
        tmp->recv(left, slot_, (at - begin(recv_c)) * es_, n * es_);
      });
      post_sends(right, send_c);
      pieces(begin(recv_c), end(recv_c), [&](std::size_t k, std::size_t off, std::size_t n, std::size_t at) {
        gloo_deadline::check(tmp->waitRecv(deadline_.remaining()), "ring receive");
        auto* dst = static_cast<char*>(frags_[k].data) + off * es_;
        const char* in = scratch_.data() + (at - begin(recv_c)) * es_;
        if (last && scale != 1.0)
          sum_scaled(dst, dst, in, n, dt_, scale); // averaging fused here
        else
          reduce(dst, dst, in, n);
      });
      wait_sends();
    }
    for (int s = 0; s + 1 < w; ++s) { // all-gather the owned, final chunks
      const int send_c = (r + 1 - s + w) % w, recv_c = (r - s + w) % w;
      std::vector<std::size_t> receivers;
      pieces(begin(recv_c), end(recv_c), [&](std::size_t k, std::size_t off, std::size_t n, std::size_t) {
        bufs_[k]->recv(left, slot_, off * es_, n * es_);
        receivers.push_back(k);
      });
      post_sends(right, send_c);
      for (auto k : receivers)
        gloo_deadline::check(bufs_[k]->waitRecv(deadline_.remaining()), "ring receive");
      wait_sends();
    }
  }

private:
  std::size_t begin(int c) const {
    return total_ * static_cast<std::size_t>(c) / static_cast<std::size_t>(ctx_->size);
  }
  std::size_t end(int c) const { return begin(c + 1); }

  /// Calls f(fragment, offset in fragment, count, offset in bucket) for the
  /// pieces of bucket elements [a, b): cut at fragment ends and at the piece size.
  template <class F> void pieces(std::size_t a, std::size_t b, F&& f) const {
    if (a >= b) return;
    std::size_t k =
        static_cast<std::size_t>(std::upper_bound(starts_.begin(), starts_.end(), a) - starts_.begin()) - 1;
    const std::size_t max_piece = std::max<std::size_t>(1, max_piece_bytes_ / es_);
    while (a < b) {
      while (starts_[k + 1] <= a)
        ++k;
      const std::size_t n = std::min({b, starts_[k + 1], a + max_piece}) - a;
      f(k, a - starts_[k], n, a);
      a += n;
    }
  }

  void post_sends(int right, int c) {
    pieces(begin(c), end(c), [&](std::size_t k, std::size_t off, std::size_t n, std::size_t) {
      bufs_[k]->send(right, slot_, off * es_, n * es_);
      senders_.push_back(k);
    });
  }

  void wait_sends() {
    for (auto k : senders_)
      gloo_deadline::check(bufs_[k]->waitSend(deadline_.remaining()), "ring send");
    senders_.clear();
  }

  std::shared_ptr<::gloo::Context> ctx_;
  gloo_waits& waits_;
  const std::vector<fragment>& frags_;
  dtype dt_;
  std::size_t es_;
  std::size_t max_piece_bytes_;
  reduce_fn reduce_;
  std::vector<char>& scratch_;
  std::vector<std::size_t> starts_;
  std::vector<gloo_waits::buffer> bufs_;
  std::vector<std::size_t> senders_;
  std::size_t total_ = 0;
  std::uint64_t slot_ = 0;
  gloo_deadline deadline_;
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_GLOO_RING_HPP
