// send and recv over Gloo's transport, on buffers ddp owns (so that another
// thread can end their waits: detail/gloo/waits.hpp). The k-th operation of a
// rank with a peer is matched with the peer's k-th operation with this rank
// (each side counts the pair's operations in its own order): both send their
// header on the pair's k-th slot and receive the other's, so both see the
// same two headers and reach the same verdict before any data moves. A send
// against a recv of another count, dtype or tag, or two sends (or two recvs)
// facing each other, is ddp::error(mismatch) on both ranks, not a message that
// Gloo's I/O thread would end the process on (detail/gloo/header.hpp).
#ifndef DDP_DETAIL_GLOO_P2P_HPP
#define DDP_DETAIL_GLOO_P2P_HPP

#include <ddp/detail/gloo/deadline.hpp>
#include <ddp/detail/gloo/slots.hpp>
#include <ddp/detail/gloo/waits.hpp>
#include <ddp/error.hpp>
#include <ddp/tensor.hpp>

#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

/// What one side of a pair is about to do; sent as raw bytes.
struct p2p_header {
  static constexpr std::uint32_t expected_magic = 0x50504444; // "DDPP"
  std::uint32_t magic = expected_magic;
  std::uint8_t sends = 0; ///< 1: a send, 0: a recv
  std::uint8_t dt = 0;    ///< ddp::dtype
  std::uint16_t reserved = 0;
  std::int64_t tag = 0;
  std::uint64_t count = 0;

  /// As its rank called it, with rank `other`.
  std::string describe(int other) const {
    if (magic != expected_magic) return "something that is not a ddp send/recv header";
    return std::string(sends ? "send to rank " : "recv from rank ") + std::to_string(other) + " of " +
           std::to_string(count) + " x " + std::string(ddp::to_string(static_cast<dtype>(dt))) + " (tag " +
           std::to_string(tag) + ")";
  }
};
static_assert(sizeof(p2p_header) == 24, "p2p_header is sent as raw bytes: keep it padding-free");

class gloo_p2p {
public:
  /// Sends (`sends`) `n` elements at `data` to `peer`, or receives them from
  /// it, once the peer's matching operation agrees. Throws ddp::error(mismatch)
  /// on both ranks when they disagree, gloo::IoException when a wait times out,
  /// is interrupted, or its connection fails. Worker thread only.
  void run(const std::shared_ptr<::gloo::Context>& ctx, gloo_waits& waits, bool sends, void* data,
           std::size_t n, dtype dt, int peer, std::int64_t tag, std::chrono::milliseconds timeout,
           const std::string& what) {
    const int w = ctx->size, r = ctx->rank;
    if (next_.size() != static_cast<std::size_t>(w)) next_.assign(static_cast<std::size_t>(w), 0);
    const std::uint32_t seq = next_[static_cast<std::size_t>(peer)]++;
    const gloo_deadline deadline(timeout);
    mine_ = p2p_header{};
    mine_.sends = sends ? 1 : 0;
    mine_.dt = static_cast<std::uint8_t>(dt);
    mine_.tag = tag;
    mine_.count = n;
    theirs_ = p2p_header{};
    theirs_.magic = 0;
    {
      const auto slot = ::gloo::Slot::build(p2p_header_slot_prefix, seq);
      auto in = waits.make(*ctx, &theirs_, sizeof theirs_);
      auto out = waits.make(*ctx, &mine_, sizeof mine_);
      in->recv(peer, slot, 0, sizeof theirs_);
      out->send(peer, slot, 0, sizeof mine_);
      gloo_deadline::check(in->waitRecv(deadline.remaining()), "send/recv header receive");
      gloo_deadline::check(out->waitSend(deadline.remaining()), "send/recv header send");
    }
    const bool agree = theirs_.magic == p2p_header::expected_magic && theirs_.sends != mine_.sends &&
                       theirs_.dt == mine_.dt && theirs_.tag == mine_.tag && theirs_.count == mine_.count;
    if (!agree) {
      std::string hint;
      if (theirs_.magic == p2p_header::expected_magic && theirs_.sends == mine_.sends)
        hint = mine_.sends
                   ? " Both ranks send first and wait for the other: let one of them recv first (send/recv "
                     "run in the group's order, one at a time), or use all_to_all."
                   : " Both ranks wait to receive: one of them must send.";
      throw error(
          error_kind::mismatch,
          what + ": rank " + std::to_string(r) + " and rank " + std::to_string(peer) +
              " disagree on their send/recv #" + std::to_string(seq) + " with each other: this rank (" +
              std::to_string(r) + ") called " + mine_.describe(peer) + ", rank " + std::to_string(peer) +
              " called " + theirs_.describe(r) +
              ". A pair's sends and recvs are matched in the order each rank calls them: the k-th "
              "send of one must meet the k-th recv of the other, with the same count, dtype and "
              "tag." +
              hint + " This group is unusable now: every later collective throws; create a new group.",
          peer);
    }
    if (n == 0) return;
    const std::size_t bytes = n * size_of(dt);
    const auto slot = ::gloo::Slot::build(p2p_data_slot_prefix, seq);
    auto buf = waits.make(*ctx, data, bytes);
    if (sends) {
      buf->send(peer, slot, 0, bytes);
      gloo_deadline::check(buf->waitSend(deadline.remaining()), "send");
    } else {
      buf->recv(peer, slot, 0, bytes);
      gloo_deadline::check(buf->waitRecv(deadline.remaining()), "recv");
    }
  }

private:
  std::vector<std::uint32_t> next_; ///< the next operation's number, per peer
  p2p_header mine_, theirs_;        ///< the header buffers (kept alive for the transport)
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_GLOO_P2P_HPP
