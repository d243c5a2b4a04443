// How each collective of the Gloo communicator runs over the group's mesh:
// the header round first (small tensors ride with it, and ranks that disagree
// fail with mismatch), then ddp's ring, chain or block exchange for larger ones.
#ifndef DDP_DETAIL_GLOO_COLLECTIVES_HPP
#define DDP_DETAIL_GLOO_COLLECTIVES_HPP

#include <ddp/detail/backend/fragment.hpp>
#include <ddp/detail/common/message.hpp>
#include <ddp/detail/gloo/chain.hpp>
#include <ddp/detail/gloo/exchange.hpp>
#include <ddp/detail/gloo/header.hpp>
#include <ddp/detail/gloo/mesh.hpp>
#include <ddp/detail/gloo/ring.hpp>
#include <ddp/detail/gloo/waits.hpp>
#include <ddp/detail/numeric/elementwise.hpp>
#include <ddp/error.hpp>
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

  /// A subgroup's job ranks, which its mismatch errors name (header_round::name_ranks).
  void name_ranks(std::vector<int> job_ranks) { headers_.name_ranks(std::move(job_ranks)); }

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

  /// A bucket's fragments summed around ddp's ring, then scaled. The header
  /// round first, as every collective has: it carries the step check (ranks at
  /// different steps, check_finite's finding, a repeated synchronize(): Note
  /// [step check]), and ranks with different pieces would cut the ring's messages
  /// differently (wrong data, or Gloo aborting the process). One round trip of
  /// a 56-byte header, beside a bucket's ring of 2(W-1) messages.
  void all_reduce_fragments(const collective_header& h, const std::string& what,
                            const std::vector<fragment>& frags, dtype dt, double scale) {
    if (size_ > 1) exchange_header(h, what);
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

  /// Block p of `in` (n elements each) goes to rank p, block p of `out`
  /// comes from rank p. Small blocks ride with the header; larger ones go
  /// straight from `in` to the peer's `out` (exchange_v). `in` may be `out`.
  void all_to_all(std::uint32_t tag, const std::string& what, const void* in, void* out, std::size_t n,
                  dtype dt) {
    const std::size_t bytes = n * size_of(dt);
    const auto* src = static_cast<const char*>(in);
    auto* dst = static_cast<char*>(out);
    auto at = [&](int p) { return bytes * static_cast<std::size_t>(p); };
    if (size_ == 1) {
      if (n) std::memmove(out, in, bytes);
      return;
    }
    const bool small = bytes <= header_round::inline_cap(size_);
    exchange(header(collective_kind::all_to_all, tag, n, dt), what, [&](int p) {
      return payload{src + at(p), small ? bytes : 0};
    });
    if (n == 0) return;
    if (small) { // every block already sent: `out` may overwrite `in` now
      std::memmove(dst + at(rank_), src + at(rank_), bytes);
      for (int p = 0; p < size_; ++p)
        if (p != rank_) std::memcpy(dst + at(p), headers_.payload(p), bytes);
      return;
    }
    std::vector<std::size_t> counts(static_cast<std::size_t>(size_), n);
    exchange_blocks_v(tag, src, counts, dst, counts, dt);
  }

  /// all_to_all with a count per peer (torch's all_to_all_single with split
  /// sizes): rank r sends send_counts[p] elements to p, from `in` packed in rank
  /// order, and receives recv_counts[p] from p into `out`, packed likewise.
  /// Every rank's counts travel with the header round, so every rank checks the
  /// whole matrix (send_counts[p] on rank r == recv_counts[r] on rank p) and
  /// names the same first disagreement.
  void all_to_all_v(std::uint32_t tag, const std::string& what, const void* in,
                    const std::vector<std::size_t>& send_counts, void* out,
                    const std::vector<std::size_t>& recv_counts, dtype dt) {
    const auto w = static_cast<std::size_t>(size_);
    std::vector<std::uint64_t> mine(2 * w);
    for (std::size_t p = 0; p < w; ++p) {
      mine[p] = send_counts[p];
      mine[w + p] = recv_counts[p];
    }
    if (size_ > 1)
      exchange(header(collective_kind::all_to_all_v, tag, 0, dt), what, [&](int) {
        return payload{mine.data(), mine.size() * sizeof(std::uint64_t)};
      });
    // counts(q)[p]: rank q's send count to p; counts(q)[w + p]: its receive count from p.
    auto counts = [&](int q) {
      const void* from = q == rank_ ? static_cast<const void*>(mine.data()) : headers_.payload(q);
      std::vector<std::uint64_t> c(2 * w);
      std::memcpy(c.data(), from, c.size() * sizeof(std::uint64_t));
      return c;
    };
    std::vector<std::vector<std::uint64_t>> all;
    for (int q = 0; q < size_; ++q)
      all.push_back(counts(q));
    for (std::size_t i = 0; i < w; ++i)
      for (std::size_t j = 0; j < w; ++j)
        if (all[i][j] != all[j][w + i])
          detail::throw_error(
              error_kind::mismatch,
              {what, ": rank ", i, " sends ", all[i][j], " elements to rank ", j, ", which expects ",
               all[j][w + i], " from it (send_counts[", j, "] on rank ", i, " against recv_counts[", i,
               "] on rank ", j,
               "). Every rank's send_counts[p] must equal rank p's recv_counts for it. This "
               "group is unusable now: every later collective throws this error; create a new "
               "group."},
              static_cast<int>(i));
    exchange_blocks_v(tag, static_cast<const char*>(in), send_counts, static_cast<char*>(out), recv_counts,
                      dt);
  }

  /// Root's `out` (W blocks of n) receives every rank's `in` in rank order;
  /// small blocks ride with the header. Root's `in` may be its own block of `out`.
  void gather(std::uint32_t tag, const std::string& what, const void* in, void* out, std::size_t n, dtype dt,
              int root) {
    const std::size_t bytes = n * size_of(dt);
    auto block = [&](int p) { return static_cast<char*>(out) + bytes * static_cast<std::size_t>(p); };
    const bool small = bytes <= header_round::inline_cap(size_);
    if (size_ > 1) {
      auto h = header(collective_kind::gather, tag, n, dt);
      h.root = root;
      exchange(h, what, [&](int p) { return payload{in, small && p == root ? bytes : 0}; });
    }
    if (n == 0) return;
    if (rank_ == root) std::memmove(block(root), in, bytes);
    if (size_ == 1) return;
    if (small) {
      if (rank_ == root)
        for (int p = 0; p < size_; ++p)
          if (p != root) std::memcpy(block(p), headers_.payload(p), bytes);
      return;
    }
    std::vector<peer_block> sends(static_cast<std::size_t>(size_)), recvs(sends.size());
    if (rank_ == root)
      for (int p = 0; p < size_; ++p)
        recvs[static_cast<std::size_t>(p)] = {block(p), bytes};
    else
      sends[static_cast<std::size_t>(root)] = {const_cast<void*>(in), bytes};
    exchange_v(ctx_, waits_, sends, recvs, tag, timeout_);
  }

  /// Block p of root's `in` (W blocks of n) goes to rank p's `out`; small
  /// blocks ride with the header. Root's `out` may be its own block of `in`.
  void scatter(std::uint32_t tag, const std::string& what, const void* in, void* out, std::size_t n, dtype dt,
               int root) {
    const std::size_t bytes = n * size_of(dt);
    auto block = [&](int p) { return static_cast<const char*>(in) + bytes * static_cast<std::size_t>(p); };
    const bool small = bytes <= header_round::inline_cap(size_);
    if (size_ > 1) {
      auto h = header(collective_kind::scatter, tag, n, dt);
      h.root = root;
      exchange(h, what, [&](int p) {
        return payload{rank_ == root ? block(p) : nullptr, small && rank_ == root ? bytes : 0};
      });
    }
    if (n == 0) return;
    if (rank_ == root) std::memmove(out, block(root), bytes);
    if (size_ == 1) return;
    if (small) {
      if (rank_ != root) std::memcpy(out, headers_.payload(root), bytes);
      return;
    }
    std::vector<peer_block> sends(static_cast<std::size_t>(size_)), recvs(sends.size());
    if (rank_ == root)
      for (int p = 0; p < size_; ++p)
        sends[static_cast<std::size_t>(p)] = {const_cast<char*>(block(p)), bytes};
    else
      recvs[static_cast<std::size_t>(root)] = {out, bytes};
    exchange_v(ctx_, waits_, sends, recvs, tag, timeout_);
  }

  /// Root's `data` becomes the reduction of every rank's, reduced in rank
  /// order (the same bits as all_reduce's small path); the others' is left as
  /// it was. Every rank sends its whole tensor to the root (small ones with the
  /// header), which holds W-1 of them in scratch: a reduce is one step, where
  /// a ring would take 2(W-1).
  void reduce(std::uint32_t tag, const std::string& what, void* data, std::size_t n, dtype dt, op o,
              int root) {
    const std::size_t bytes = n * size_of(dt);
    const bool small = bytes <= header_round::inline_cap(size_);
    if (size_ > 1) {
      auto h = header(collective_kind::reduce, tag, n, dt);
      h.reduce = static_cast<std::uint8_t>(o);
      h.root = root;
      exchange(h, what, [&](int p) { return payload{data, small && p == root ? bytes : 0}; });
    }
    if (n == 0 || rank_ != root) {
      if (n != 0 && size_ > 1 && !small) {
        std::vector<peer_block> sends(static_cast<std::size_t>(size_)), recvs(sends.size());
        sends[static_cast<std::size_t>(root)] = {data, bytes};
        exchange_v(ctx_, waits_, sends, recvs, tag, timeout_);
      }
      return;
    }
    // from(r): rank r's contribution; this rank's own is read from a copy, as `data` is written below.
    std::function<const char*(int)> from;
    if (size_ == 1) {
      from = [&](int) { return static_cast<const char*>(data); };
    } else if (small) {
      std::memcpy(headers_.own_slot(rank_), data, bytes);
      from = [&](int r) { return r == rank_ ? headers_.own_slot(rank_) : headers_.payload(r); };
    } else {
      scratch_.resize(bytes * static_cast<std::size_t>(size_));
      auto at = [&](int p) { return scratch_.data() + bytes * static_cast<std::size_t>(p); };
      std::memcpy(at(rank_), data, bytes);
      std::vector<peer_block> sends(static_cast<std::size_t>(size_)), recvs(sends.size());
      for (int p = 0; p < size_; ++p)
        if (p != rank_) recvs[static_cast<std::size_t>(p)] = {at(p), bytes};
      exchange_v(ctx_, waits_, sends, recvs, tag, timeout_);
      from = [at](int r) { return static_cast<const char*>(at(r)); };
    }
    std::memmove(data, from(0), bytes);
    auto fn = reduce_for(dt, o);
    for (int r = 1; r < size_; ++r)
      fn(data, data, from(r), n);
    if (o == op::avg) scale_in_place(data, n, dt, 1.0 / size_);
    // The root held W tensors here: past what the ring keeps (its pieces, 1 MiB by
    // default), give the memory back rather than hold W x n for the group's life.
    if (scratch_.capacity() > (std::size_t{16} << 20)) std::vector<char>().swap(scratch_);
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

  /// A collective this rank's arguments do not fit (`why`, from process_group's
  /// local checks): it still takes part in the header round, flagged, so
  /// every rank throws ddp::error(mismatch) now instead of waiting for this
  /// rank until its timeout; this rank's error says why.
  [[noreturn]] void refuse(collective_kind kind, std::uint32_t tag, const std::string& what, dtype dt,
                           int root, const std::string& why) {
    const std::string mine =
        detail::message({what, ": ", why,
                         ". Every rank of the group fails this collective (ddp::error(mismatch) naming "
                         "this rank); nothing moved. This group is unusable now: every later collective "
                         "throws; create a new group."});
    if (size_ > 1) {
      auto h = header(kind, tag, 0, dt);
      h.root = root;
      h.flags = collective_header::flag_refused;
      try {
        exchange_header(h, what);
      } catch (const error& e) {
        if (e.kind() != error_kind::mismatch) throw; // the round itself failed: that error stands
      }
    }
    detail::throw_error(error_kind::mismatch, {mine}, rank_);
  }

  /// The header round alone: no payload.
  void exchange_header(const collective_header& h, const std::string& what) {
    exchange(h, what, [](int) { return payload{}; });
  }

private:
  /// Sends counts_out[p] elements from `in` (packed in rank order) to each
  /// peer p and receives counts_in[p] from it into `out` (likewise), this
  /// rank's own block copied. When `in` and `out` overlap, what is sent is
  /// read from a copy in scratch (the receives would overwrite it).
  void exchange_blocks_v(std::uint32_t tag, const char* in, const std::vector<std::size_t>& counts_out,
                         char* out, const std::vector<std::size_t>& counts_in, dtype dt) {
    const std::size_t es = size_of(dt), w = static_cast<std::size_t>(size_);
    std::size_t total_out = 0, total_in = 0;
    for (std::size_t p = 0; p < w; ++p)
      total_out += counts_out[p] * es, total_in += counts_in[p] * es;
    if (total_out && total_in && in < out + total_in && out < in + total_out) {
      scratch_.assign(in, in + total_out);
      in = scratch_.data();
    }
    std::vector<peer_block> sends(w), recvs(w);
    std::size_t at_out = 0, at_in = 0;
    for (std::size_t p = 0; p < w; ++p) {
      sends[p] = {const_cast<char*>(in) + at_out, counts_out[p] * es};
      recvs[p] = {out + at_in, counts_in[p] * es};
      at_out += sends[p].bytes;
      at_in += recvs[p].bytes;
    }
    const auto r = static_cast<std::size_t>(rank_);
    if (recvs[r].bytes) std::memmove(recvs[r].data, sends[r].data, recvs[r].bytes);
    exchange_v(ctx_, waits_, sends, recvs, tag, timeout_);
  }

  int rank_, size_;
  std::chrono::milliseconds timeout_;
  const std::shared_ptr<gloo_mesh_context>& ctx_; ///< the communicator's, replaced on failure
  gloo_waits& waits_;
  std::vector<char>& scratch_;
  header_round headers_;
  exchange_hook before_exchange_;
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_GLOO_COLLECTIVES_HPP
