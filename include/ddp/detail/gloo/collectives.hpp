// How each collective of the Gloo communicator runs over the group's mesh:
// the header round first (small tensors ride with it, and ranks that disagree
// fail with mismatch), then ddp's ring, chain or block exchange for larger ones.
#ifndef DDP_DETAIL_GLOO_COLLECTIVES_HPP
#define DDP_DETAIL_GLOO_COLLECTIVES_HPP

#include <ddp/detail/backend/fragment.hpp>
#include <ddp/detail/gloo/chain.hpp>
#include <ddp/detail/gloo/exchange.hpp>
#include <ddp/detail/gloo/header.hpp>
#include <ddp/detail/gloo/mesh.hpp>
#include <ddp/detail/gloo/ring.hpp>
#include <ddp/detail/gloo/waits.hpp>
#include <ddp/detail/numeric/elementwise.hpp>
#include <ddp/op.hpp>
#include <ddp/tensor.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

class gloo_collectives {
public:
  /// Runs before every header round, on the worker thread.
  using exchange_hook = std::function<void(const collective_header& h, const std::string& what)>;

  /// `ctx`, `waits` and `scratch` are the communicator's, which outlives this.
  gloo_collectives(int rank, int size, std::chrono::milliseconds timeout,
                   const std::shared_ptr<gloo_mesh_context>& ctx, gloo_waits& waits,
                   std::vector<char>& scratch, exchange_hook before_exchange)
      : rank_(rank), size_(size), timeout_(timeout), ctx_(ctx), waits_(waits), scratch_(scratch),
        before_exchange_(std::move(before_exchange)) {}

  /// all_reduce over TCP, once `h` (kind, tag, count, dtype, op, piece) is filled in.
  void all_reduce(const collective_header& h, const std::string& what, void* data, std::size_t n, dtype dt,
                  op o) {
    const std::size_t bytes = n * size_of(dt);
    const bool small = bytes <= header_round::inline_cap(size_);
    exchange(h, what, [&](int) { return payload{data, small ? bytes : 0}; });
    if (n == 0) return;
    const double scale = o == op::avg ? 1.0 / size_ : 1.0;
    if (!small) {
      std::vector<fragment> whole{{data, n}};
      fragment_ring(ctx_, waits_, whole, dt, scratch_, h.piece, o == op::avg ? op::sum : o)
          .run(h.tag, scale, timeout_);
      return;
    }
    // Every rank reduces the same contributions in the same (rank) order: same bits everywhere.
    std::memcpy(headers_.own_slot(rank_), data, bytes);
    std::memcpy(data, headers_.payload(0), bytes);
    const auto fn = reduce_for(dt, o);
    for (int r = 1; r < size_; ++r) {
      if (r + 1 == size_ && scale != 1.0)
        sum_scaled(data, data, headers_.payload(r), n, dt, scale); // averaging fused
      else
        fn(data, data, headers_.payload(r), n);
    }
  }

  /// A bucket's fragments summed around ddp's ring, then scaled. Buckets skip
  /// the header round (a round trip each), but ranks with different pieces
  /// would cut the ring's messages differently: wrong data, or Gloo aborting
  /// the process. So the first bucket, and the first after a rank changed its
  /// piece, compare headers.
  void all_reduce_fragments(const collective_header& h, const std::string& what,
                            const std::vector<fragment>& frags, dtype dt, double scale) {
    if (h.piece != verified_piece_ && size_ > 1) {
      exchange_header(h, what);
      verified_piece_ = h.piece;
    }
    fragment_ring(ctx_, waits_, frags, dt, scratch_, h.piece).run(h.tag, scale, timeout_);
  }

  void broadcast(std::uint32_t tag, const std::string& what, void* data, std::size_t n, dtype dt, int root,
                 std::size_t piece) {
    if (size_ == 1) return;
    auto h = header(collective_kind::broadcast, tag, n, dt);
    h.root = root;
    h.piece = piece; // it cuts the chain's messages: ranks must agree on it
    const std::size_t bytes = n * size_of(dt);
    const bool small = bytes <= header_round::inline_cap(size_);
    exchange(h, what, [&](int) { return payload{data, small && rank_ == root ? bytes : 0}; });
    if (n == 0) return;
    if (small) {
      if (rank_ != root) std::memcpy(data, headers_.payload(root), bytes);
      return;
    }
    chain_broadcast::run(ctx_, waits_, data, bytes, root, tag, piece, timeout_);
  }

  void all_gather(std::uint32_t tag, const std::string& what, const void* in, void* out, std::size_t n,
                  dtype dt) {
    const std::size_t bytes = n * size_of(dt);
    if (size_ == 1) {
      if (n) std::memmove(out, in, bytes);
      return;
    }
    const bool small = bytes <= header_round::inline_cap(size_);
    exchange(header(collective_kind::all_gather, tag, n, dt), what, [&](int) {
      return payload{in, small ? bytes : 0};
    });
    if (n == 0) return;
    auto* o = static_cast<char*>(out);
    auto* own = o + bytes * static_cast<std::size_t>(rank_);
    std::memmove(own, in, bytes);
    if (small) {
      for (int r = 0; r < size_; ++r)
        if (r != rank_) std::memcpy(o + bytes * static_cast<std::size_t>(r), headers_.payload(r), bytes);
      return;
    }
    // Own block to every peer, theirs straight into `out`.
    exchange_blocks(ctx_, waits_, {own, bytes, true}, {o, bytes}, tag, timeout_);
  }

  void reduce_scatter(std::uint32_t tag, const std::string& what, const void* in, void* out, std::size_t n,
                      dtype dt, op o) {
    const std::size_t bytes = n * size_of(dt), total = bytes * static_cast<std::size_t>(size_);
    const bool small = bytes <= header_round::inline_cap(size_);
    const auto* blocks = static_cast<const char*>(in);
    auto block = [&](int r) { return blocks + bytes * static_cast<std::size_t>(r); };
    if (size_ > 1) {
      auto h = header(collective_kind::reduce_scatter, tag, n, dt);
      h.reduce = static_cast<std::uint8_t>(o);
      exchange(h, what, [&](int p) { return payload{block(p), small ? bytes : 0}; });
    }
    if (n == 0) return;
    // from(r): the block rank r sent for this rank. This rank's own is read
    // from a copy: `out` may overlap `in` (in place), and is written below.
    std::function<const char*(int)> from;
    if (size_ == 1) {
      from = [&](int) { return blocks; };
    } else if (small) {
      std::memcpy(headers_.own_slot(rank_), block(rank_), bytes);
      from = [&](int r) { return r == rank_ ? headers_.own_slot(rank_) : headers_.payload(r); };
    } else {
      scratch_.resize(total);
      auto* mine = scratch_.data() + bytes * static_cast<std::size_t>(rank_);
      std::memcpy(mine, block(rank_), bytes);
      exchange_blocks(ctx_, waits_, {const_cast<char*>(blocks), bytes}, {scratch_.data(), bytes}, tag,
                      timeout_);
      from = [&](int r) {
        return static_cast<const char*>(scratch_.data()) + bytes * static_cast<std::size_t>(r);
      };
    }
    std::memmove(out, from(0), bytes);
    auto fn = reduce_for(dt, o);
    for (int r = 1; r < size_; ++r)
      fn(out, out, from(r), n);
    if (o == op::avg) scale_in_place(out, n, dt, 1.0 / size_);
  }

  struct payload {
    const void* data = nullptr;
    std::size_t bytes = 0;
  };

  static collective_header header(collective_kind kind, std::uint32_t tag, std::size_t n, dtype dt) {
    collective_header h;
    h.kind = kind;
    h.tag = tag;
    h.count = n;
    h.dt = static_cast<std::uint8_t>(dt);
    // The data-parallel step this collective reduces, set by the backend's
    // worker around the collective (gloo_communicator_impl::submit).
    if (current_call) {
      h.call = current_call.call;
      h.step = current_call.step;
      h.bucket = static_cast<std::uint16_t>(current_call.bucket);
      if (current_call.repeat) h.flags |= collective_header::flag_repeat;
      if (current_call.certain_repeat) h.flags |= collective_header::flag_certain_repeat;
      h.non_finite = current_call.non_finite;
    }
    return h;
  }

  /// The header round every collective starts with (see detail/gloo/header.hpp):
  /// throws ddp::error(mismatch) on every rank when ranks disagree.
  template <class P> void exchange(const collective_header& h, const std::string& what, P&& payload_for) {
    if (before_exchange_) before_exchange_(h, what);
    headers_.run(
        ctx_, waits_, h,
        [&](int p) {
          payload pl = payload_for(p);
          return std::pair<const void*, std::size_t>{pl.data, pl.bytes};
        },
        timeout_, what);
  }

  /// The header round alone: no payload.
  void exchange_header(const collective_header& h, const std::string& what) {
    exchange(h, what, [](int) { return payload{}; });
  }

private:
  int rank_, size_;
  std::chrono::milliseconds timeout_;
  const std::shared_ptr<gloo_mesh_context>& ctx_; ///< the communicator's, replaced on failure
  gloo_waits& waits_;
  std::vector<char>& scratch_;
  header_round headers_;
  exchange_hook before_exchange_;
  std::size_t verified_piece_ = 0; ///< the piece every rank's buckets last agreed on (worker thread only)
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_GLOO_COLLECTIVES_HPP
