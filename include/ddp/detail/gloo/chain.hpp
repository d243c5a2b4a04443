// A pipelined chain broadcast over Gloo's transport, on buffers ddp owns (so
// that another thread can end its waits: detail/gloo/waits.hpp). The ranks form a
// chain from the root in rank order (root, root+1, ..., wrapping around); the
// data goes down it in pieces, and a rank passes each piece on as soon as it
// has it. Every rank receives the data once and sends it at most once, so a
// broadcast costs about one transfer of the data plus (W-2) pieces, whatever
// the world size, where a tree costs log2(W) transfers (piece_for keeps the
// pieces small enough for a long chain).
// Every receive is posted at the start, straight into the caller's memory:
// nothing is copied, and no rank waits for room.
#ifndef DDP_DETAIL_GLOO_CHAIN_HPP
#define DDP_DETAIL_GLOO_CHAIN_HPP

#include <ddp/detail/gloo/deadline.hpp>
#include <ddp/detail/gloo/slots.hpp>
#include <ddp/detail/gloo/waits.hpp>

#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

DDP_BEGIN_NAMESPACE
namespace detail {

class chain_broadcast {
public:
  /// The smallest piece worth its own message, when the data is cut finer to
  /// keep a long chain busy (below, per-message costs dominate on TCP).
  static constexpr std::size_t min_piece_bytes = std::size_t{64} << 10;

  /// The piece size: at most `max_piece_bytes`, and small enough that the
  /// chain's fill, (W-2) pieces, stays near one transfer of the data: with P
  /// pieces the broadcast costs (W+P-2)/P transfers of it, so P ~ W pieces
  /// keep it under 2 (a binomial tree: log2 W). Not below min_piece_bytes
  /// (unless max_piece_bytes is: tests cut pieces small). A model: piece sizes
  /// made no difference on the 2-core development machine (docs/performance.md,
  /// Collectives).
  static std::size_t piece_for(std::size_t bytes, int w, std::size_t max_piece_bytes) {
    const std::size_t most = std::max<std::size_t>(max_piece_bytes, 1);
    return std::clamp(bytes / static_cast<std::size_t>(std::max(w, 1)), std::min(min_piece_bytes, most),
                      most);
  }

  /// Copies `bytes` at `data` on rank `root` to `data` on every rank, in
  /// pieces of at most `max_piece_bytes` (piece_for). Throws
  /// gloo::IoException when a wait times out, is interrupted, or its
  /// connection fails.
  static void run(const std::shared_ptr<::gloo::Context>& ctx, gloo_waits& waits, void* data,
                  std::size_t bytes, int root, std::uint32_t tag, std::size_t max_piece_bytes,
                  std::chrono::milliseconds timeout) {
    const int w = ctx->size, r = ctx->rank;
    if (w == 1 || bytes == 0) return;
    const gloo_deadline deadline(timeout);
    const auto slot = ::gloo::Slot::build(chain_slot_prefix, tag);
    const std::size_t piece = piece_for(bytes, w, max_piece_bytes);
    const std::size_t pieces = (bytes + piece - 1) / piece;
    auto at = [&](std::size_t k) { return k * piece; };
    auto len = [&](std::size_t k) { return std::min(piece, bytes - at(k)); };
    const int position = (r - root + w) % w; // in the chain
    const int from = (r - 1 + w) % w, to = (r + 1) % w;
    const bool receives = position != 0, sends = position + 1 != w;

    auto buf = waits.make(*ctx, data, bytes);
    if (receives)
      for (std::size_t k = 0; k < pieces; ++k)
        buf->recv(from, slot, at(k), len(k));
    for (std::size_t k = 0; k < pieces; ++k) {
      // Pieces from one peer in one slot arrive in the order they were sent.
      if (receives) gloo_deadline::check(buf->waitRecv(deadline.remaining()), "broadcast receive");
      if (sends) buf->send(to, slot, at(k), len(k));
    }
    if (sends)
      for (std::size_t k = 0; k < pieces; ++k)
        gloo_deadline::check(buf->waitSend(deadline.remaining()), "broadcast send");
  }
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_GLOO_CHAIN_HPP
