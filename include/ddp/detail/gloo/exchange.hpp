// A direct block exchange over Gloo's transport, on buffers ddp owns (so that
// another thread can end its waits: detail/gloo/waits.hpp): each rank sends a block
// of `bytes` to every peer and receives one from every peer. all_gather sends
// its own block to everyone; reduce_scatter sends each peer the block that
// peer reduces. Every rank sends and receives (W-1) blocks, as in a ring, but
// in one step: no rank waits for another to pass a block on.
#ifndef DDP_DETAIL_GLOO_EXCHANGE_HPP
#define DDP_DETAIL_GLOO_EXCHANGE_HPP

#include <ddp/detail/gloo/deadline.hpp>
#include <ddp/detail/gloo/slots.hpp>
#include <ddp/detail/gloo/waits.hpp>

#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

/// One side of the exchange: W blocks of `block_bytes`, block p at
/// base + p * block_bytes (or, for a send of the same block to everyone, one
/// block at base: `same_block` true).
struct block_layout {
  void* base;
  std::size_t block_bytes;
  bool same_block = false;

  std::size_t offset(int p) const { return same_block ? 0 : static_cast<std::size_t>(p) * block_bytes; }
  std::size_t span(int w) const {
    return same_block ? block_bytes : static_cast<std::size_t>(w) * block_bytes;
  }
};

/// Sends block p of `out` to each peer p and receives peer p's into block p of
/// `in` (this rank's own blocks are left alone). `out` and `in` may overlap
/// (all_gather sends its own block of the very memory it receives into). Throws gloo::IoException when a wait
/// times out, is interrupted, or its connection fails.
inline void exchange_blocks(const std::shared_ptr<::gloo::Context>& ctx, gloo_waits& waits, block_layout out,
                            block_layout in, std::uint32_t tag, std::chrono::milliseconds timeout) {
  const int w = ctx->size, r = ctx->rank;
  if (w == 1 || in.block_bytes == 0) return;
  const gloo_deadline deadline(timeout);
  const auto slot = ::gloo::Slot::build(block_exchange_slot_prefix, tag);
  auto recv_buf = waits.make(*ctx, in.base, in.span(w));
  auto send_buf = waits.make(*ctx, out.base, out.span(w));
  for (int p = 0; p < w; ++p)
    if (p != r) recv_buf->recv(p, slot, in.offset(p), in.block_bytes);
  // Peers in turn from this rank's right, so that no rank gets every first send.
  for (int i = 1; i < w; ++i) {
    const int p = (r + i) % w;
    send_buf->send(p, slot, out.offset(p), out.block_bytes);
  }
  for (int i = 1; i < w; ++i)
    gloo_deadline::check(recv_buf->waitRecv(deadline.remaining()), "block receive");
  for (int i = 1; i < w; ++i)
    gloo_deadline::check(send_buf->waitSend(deadline.remaining()), "block send");
}

/// One peer's part of exchange_v: `bytes` at `data` (0 bytes: nothing).
struct peer_block {
  void* data = nullptr;
  std::size_t bytes = 0;
};

/// Sends sends[p] to each peer p and receives recvs[p] from it, each block
/// where it lies (this rank's own entries are ignored); an empty block is no
/// message. Every rank must have agreed on the sizes first (the header
/// round): a message larger than its receive ends the process inside Gloo.
/// all_to_all (equal or variable splits), gather, scatter and reduce are all
/// this one exchange with different blocks. Throws gloo::IoException when a
/// wait times out, is interrupted, or its connection fails.
inline void exchange_v(const std::shared_ptr<::gloo::Context>& ctx, gloo_waits& waits,
                       const std::vector<peer_block>& sends, const std::vector<peer_block>& recvs,
                       std::uint32_t tag, std::chrono::milliseconds timeout) {
  const int w = ctx->size, r = ctx->rank;
  if (w == 1) return;
  const gloo_deadline deadline(timeout);
  const auto slot = ::gloo::Slot::build(exchange_v_slot_prefix, tag);
  std::vector<gloo_waits::buffer> in, out;
  in.reserve(static_cast<std::size_t>(w));
  out.reserve(static_cast<std::size_t>(w));
  for (int p = 0; p < w; ++p) {
    const auto& b = recvs[static_cast<std::size_t>(p)];
    if (p == r || b.bytes == 0) continue;
    in.push_back(waits.make(*ctx, b.data, b.bytes));
    in.back()->recv(p, slot, 0, b.bytes);
  }
  // Peers in turn from this rank's right, so that no rank gets every first send.
  for (int i = 1; i < w; ++i) {
    const int p = (r + i) % w;
    const auto& b = sends[static_cast<std::size_t>(p)];
    if (b.bytes == 0) continue;
    out.push_back(waits.make(*ctx, b.data, b.bytes));
    out.back()->send(p, slot, 0, b.bytes);
  }
  for (auto& b : in)
    gloo_deadline::check(b->waitRecv(deadline.remaining()), "block receive");
  for (auto& b : out)
    gloo_deadline::check(b->waitSend(deadline.remaining()), "block send");
}

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_GLOO_EXCHANGE_HPP
