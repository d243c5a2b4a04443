// send and recv over Gloo's transport, on buffers ddp owns (so that another
// thread can end their waits: detail/gloo/waits.hpp). Messages go in lanes, one
// per peer and direction, each with a worker of its own: the k-th send of a rank
// to a peer meets the peer's k-th recv from that rank, whatever else either
// rank has posted (torch's isend/irecv: both ranks may send first, a ring
// may send all at once). Before any data moves, both ends of a message send
// their header on the message's slot and receive the other's, so both see
// the same two headers and reach the same verdict: another count, dtype or tag
// is ddp::error(mismatch) on both ranks, not a message that Gloo's I/O thread
// would end the process on (detail/gloo/header.hpp). Why lanes and not the
// group's queue: docs/design-notes.md, "Note [send/recv lanes]".
#ifndef DDP_DETAIL_GLOO_P2P_HPP
#define DDP_DETAIL_GLOO_P2P_HPP

#include <ddp/detail/backend/ordered_queue.hpp>
#include <ddp/detail/common/message.hpp>
#include <ddp/detail/common/trace.hpp>
#include <ddp/detail/fault/flight_recorder.hpp>
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
#include <cstring>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

/// What one end of a message is about to do; sent as raw bytes.
struct p2p_header {
  static constexpr std::uint32_t expected_magic = 0x50504444; // "DDPP"
  std::uint32_t magic = expected_magic;
  std::uint8_t sends = 0; ///< 1: the sender's, 0: the receiver's
  std::uint8_t dt = 0;    ///< ddp::dtype
  std::uint16_t reserved = 0;
  std::int64_t tag = 0;
  std::uint64_t count = 0;

  /// As its rank called it, with rank `other`.
  std::string describe(int other) const {
    if (magic != expected_magic) return "something that is not a ddp send/recv header";
    return detail::message({sends ? "send to rank " : "recv from rank ", other, " of ", count, " x ",
                            ddp::to_string(static_cast<dtype>(dt)), " (tag ", tag, ")"});
  }
};
static_assert(sizeof(p2p_header) == 24, "p2p_header is sent as raw bytes: keep it padding-free");

/// The largest message that travels with its header (as header_round's cap at 2-4 ranks).
inline constexpr std::size_t p2p_inline_cap = std::size_t{64} << 10;

/// One message: the header exchange, then the data (unless it rode along). Throws ddp::error(mismatch)
/// on both ranks when their headers disagree, gloo::IoException when a wait
/// times out, is interrupted, or its connection fails.
inline void p2p_transfer(const std::shared_ptr<::gloo::Context>& ctx, gloo_waits& waits, bool sends,
                         void* data, std::size_t n, dtype dt, int peer, std::int64_t tag, std::uint32_t seq,
                         std::chrono::milliseconds timeout, const std::string& what) {
  const int r = ctx->rank;
  const gloo_deadline deadline(timeout);
  // The message's own slots: its direction (lower to higher rank, or back) and its number in that lane.
  const bool upward = sends ? r < peer : peer < r;
  const auto header_slot =
      ::gloo::Slot::build(upward ? p2p_up_header_slot_prefix : p2p_down_header_slot_prefix, seq);
  const auto data_slot =
      ::gloo::Slot::build(upward ? p2p_up_data_slot_prefix : p2p_down_data_slot_prefix, seq);
  p2p_header mine, theirs;
  mine.sends = sends ? 1 : 0;
  mine.dt = static_cast<std::uint8_t>(dt);
  mine.tag = tag;
  mine.count = n;
  const std::size_t bytes = n * size_of(dt);
  // A small message rides with the sender's header: one round trip, no data message. Both
  // ends post a receive of the header plus the cap, so no header message can overrun one.
  const bool small = bytes <= p2p_inline_cap;
  std::vector<char> out_buf(sizeof mine + (sends && small ? bytes : 0));
  std::vector<char> in_buf(sizeof theirs + p2p_inline_cap);
  std::memcpy(out_buf.data(), &mine, sizeof mine);
  if (sends && small && bytes) std::memcpy(out_buf.data() + sizeof mine, data, bytes);
  {
    auto in = waits.make(*ctx, in_buf.data(), in_buf.size());
    auto out = waits.make(*ctx, out_buf.data(), out_buf.size());
    in->recv(peer, header_slot, 0, in_buf.size());
    out->send(peer, header_slot, 0, out_buf.size());
    gloo_deadline::check(in->waitRecv(deadline.remaining()), "send/recv header receive");
    gloo_deadline::check(out->waitSend(deadline.remaining()), "send/recv header send");
  }
  std::memcpy(&theirs, in_buf.data(), sizeof theirs);
  const bool agree = theirs.magic == p2p_header::expected_magic && theirs.sends != mine.sends &&
                     theirs.dt == mine.dt && theirs.tag == mine.tag && theirs.count == mine.count;
  if (!agree)
    detail::throw_error(
        error_kind::mismatch,
        {what,
         ": rank ",
         r,
         " and rank ",
         peer,
         " disagree on message #",
         seq,
         " from rank ",
         sends ? r : peer,
         " to rank ",
         sends ? peer : r,
         ": this rank (",
         r,
         ") called ",
         mine.describe(peer),
         ", rank ",
         peer,
         " called ",
         theirs.describe(r),
         ". The k-th send of a rank to a peer meets the peer's k-th recv from that rank: they "
         "must agree on count, dtype and tag. This group is unusable now: every later "
         "collective throws; create a new group."},
        peer);
  if (n == 0) return;
  if (small) {
    if (!sends) std::memcpy(data, in_buf.data() + sizeof theirs, bytes);
    return;
  }
  auto buf = waits.make(*ctx, data, bytes);
  if (sends) {
    buf->send(peer, data_slot, 0, bytes);
    gloo_deadline::check(buf->waitSend(deadline.remaining()), "send");
  } else {
    buf->recv(peer, data_slot, 0, bytes);
    gloo_deadline::check(buf->waitRecv(deadline.remaining()), "recv");
  }
}

/// The lanes: per peer and direction, a number for the next message and a
/// worker that runs that lane's messages in order (made on first use).
class gloo_p2p_lanes {
public:
  /// `label` begins each lane's row on the timeline ("comm", "comm g0c1/").
  explicit gloo_p2p_lanes(std::string label = "comm") : label_(std::move(label)) {}

  /// The group's flight recorder, which keeps each message (set before the
  /// first); a failed message writes it (DDP_FLIGHT_RECORDER) as rank `rank`.
  void set_recorder(flight_recorder* r, int rank) noexcept {
    recorder_ = r;
    rank_ = rank;
  }

  /// Queues `body(seq, what)` in the lane of (peer, sends), named `head #seq tail`; on the
  /// timeline, a "send" or "recv" span of `bytes` on the lane's row.
  work submit(int peer, bool sends, std::int64_t bytes, const std::string& head, const std::string& tail,
              std::chrono::milliseconds timeout, bool blocking,
              std::function<void(std::uint32_t seq, const std::string& what)> body) {
    ordered_queue* q = nullptr;
    std::uint32_t seq = 0;
    const std::pair<int, bool> key{peer, sends};
    std::string what;
    {
      std::lock_guard lock(mu_);
      auto& l = lanes_[key];
      if (!l.queue) {
        l.queue = std::make_unique<ordered_queue>(label_ + (sends ? " send to " : " recv from ") +
                                                  std::to_string(peer));
        if (poison_) l.queue->abort(poison_);
      }
      q = l.queue.get();
      seq = l.next++;
      what = detail::message({head, " #", seq, tail});
      l.pending.emplace(seq, what);
    }
    const std::uint64_t id = recorder_ ? recorder_->message_queued(what) : 0;
    const std::int64_t queued_ns = trace::on() ? trace::now_ns() : -1;
    return q->submit(
        [this, key, body = std::move(body), seq, what, id, queued_ns, bytes](work_state&) {
          struct done_t {
            gloo_p2p_lanes* lanes;
            std::pair<int, bool> key;
            std::uint32_t seq;
            std::int64_t queued_ns, start_ns, bytes;
            ~done_t() {
              if (start_ns >= 0)
                trace::record(trace::kind::message, start_ns, trace::now_ns() - start_ns, seq, bytes,
                              key.first, start_ns - queued_ns, key.second ? "send" : "recv");
              lanes->done(key, seq);
            }
          } done{this, key, seq, queued_ns, queued_ns >= 0 ? trace::now_ns() : -1, bytes};
          if (recorder_) recorder_->message_running(id);
          try {
            body(seq, what);
          } catch (...) {
            if (recorder_) {
              recorder_->message_finished(id, false);
              recorder_->dump_if_asked(rank_);
            }
            throw;
          }
          if (recorder_) recorder_->message_finished(id, true);
        },
        what, timeout, blocking);
  }

  /// What was posted and has not ended yet ("rank 0: recv #3 from rank 1 (...)"),
  /// by lane; meaningless once the lanes are aborted.
  std::vector<std::string> pending() {
    std::lock_guard lock(mu_);
    std::vector<std::string> out;
    for (auto& [key, l] : lanes_)
      for (auto& [seq, what] : l.pending)
        out.push_back(what);
    return out;
  }

  /// Every lane fails what it holds with `why`, and refuses later messages.
  void abort(std::exception_ptr why) {
    std::lock_guard lock(mu_);
    if (!poison_) poison_ = why;
    for (auto& [key, l] : lanes_)
      l.queue->abort(poison_);
  }

  /// The error abort() failed the lanes with, if any.
  std::exception_ptr poisoned() {
    std::lock_guard lock(mu_);
    return poison_;
  }

  void drain() {
    for (auto* q : queues())
      q->drain();
  }

  /// Before the connections go.
  void stop() {
    for (auto* q : queues())
      q->stop();
  }

private:
  std::vector<ordered_queue*> queues() {
    std::lock_guard lock(mu_);
    std::vector<ordered_queue*> out;
    for (auto& [key, l] : lanes_)
      out.push_back(l.queue.get());
    return out;
  }

  void done(std::pair<int, bool> key, std::uint32_t seq) noexcept {
    std::lock_guard lock(mu_);
    lanes_[key].pending.erase(seq);
  }

  struct lane {
    std::unique_ptr<ordered_queue> queue;
    std::uint32_t next = 0;
    std::map<std::uint32_t, std::string> pending; ///< posted, not ended, by number (pending())
  };
  std::mutex mu_;
  std::map<std::pair<int, bool>, lane> lanes_;
  std::exception_ptr poison_;
  std::string label_;
  flight_recorder* recorder_ = nullptr; ///< the group's (its collective_queue's); outlives the workers
  int rank_ = 0;
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_GLOO_P2P_HPP
