// Before any data moves, every Gloo collective sends a small fixed-size header
// (kind, dtype, op, root, count, ring piece size) to every peer and receives
// theirs, so ranks that disagree fail with ddp::error(mismatch) naming both
// sides, on every rank, instead of Gloo aborting the process.
//
// Why a header and not just care: Gloo's TCP pair checks that an incoming
// message fits the receive posted for it (GLOO_ENFORCE_LE(op.preamble.length,
// op.nbytes) in tcp::Pair::prepareRead) on its own I/O thread, where the
// throw ends in std::terminate. Header messages cannot trip it: every rank
// posts receives of the same size (header + inline_cap(w)) and sends at most that
// much, whatever its count. After the headers agree, every rank computes the
// same message sizes, so the data steps cannot trip it either.
//
// The exchange is all-to-all, so every rank sees every header and names the
// same disagreement, and no rank closes its connections before its peers have
// its header. Payloads up to inline_cap(w) ride along with the header, so a small
// all_reduce, broadcast, all_gather or reduce_scatter is this one round and
// nothing else.
#ifndef DDP_DETAIL_GLOO_HEADER_HPP
#define DDP_DETAIL_GLOO_HEADER_HPP

#include <ddp/detail/backend/call_site.hpp>
#include <ddp/detail/common/message.hpp>
#include <ddp/detail/gloo/deadline.hpp>
#include <ddp/detail/gloo/slots.hpp>
#include <ddp/detail/gloo/waits.hpp>
#include <ddp/error.hpp>
#include <ddp/op.hpp>
#include <ddp/tensor.hpp>

#include <gloo/common/error.h>
#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

enum class collective_kind : std::uint8_t {
  all_reduce = 1,
  broadcast,
  all_gather,
  reduce_scatter,
  barrier,
  all_to_all,
  all_to_all_v,
  gather,
  scatter,
  reduce
};

constexpr const char* to_string(collective_kind k) noexcept {
  switch (k) {
  case collective_kind::all_reduce: return "all_reduce";
  case collective_kind::broadcast: return "broadcast";
  case collective_kind::all_gather: return "all_gather";
  case collective_kind::reduce_scatter: return "reduce_scatter";
  case collective_kind::barrier: return "barrier";
  case collective_kind::all_to_all: return "all_to_all";
  case collective_kind::all_to_all_v: return "all_to_all (variable splits)";
  case collective_kind::gather: return "gather";
  case collective_kind::scatter: return "scatter";
  case collective_kind::reduce: return "reduce";
  }
  return "unknown collective";
}

/// What a rank is about to do; sent as raw bytes, so fixed-size and padding-free.
struct collective_header {
  /// A header and the rank that sent it.
  using ranked = std::pair<int, collective_header>;

  static constexpr std::uint32_t expected_magic = 0x48504444; // "DDPH"
  std::uint32_t magic = expected_magic;
  collective_kind kind = collective_kind::barrier;
  std::uint8_t dt = 0;       ///< ddp::dtype
  std::uint8_t reduce = 0;   ///< ddp::op (reductions only)
  std::uint8_t in_place = 0; ///< all_reduce of a shm array (root: its id; shm_shape: the byte offset)
  std::int32_t root =
      0; ///< broadcast's, gather's, scatter's or reduce's root; an in-place all_reduce's array id
  std::uint32_t tag = 0;   ///< the collective's sequence tag
  std::uint64_t count = 0; ///< elements (per rank for all_gather/reduce_scatter blocks)
  std::uint64_t piece = 0; ///< the ring's or chain's largest message: it shapes their messages
  std::uint64_t shm_shape =
      0; ///< shm: the step or half-area bytes (they shape the barriers), or the in-place offset
  std::uint32_t step = 0;   ///< the data-parallel step (call_site) this collective reduces
  std::uint16_t bucket = 0; ///< and its bucket
  call_kind call = call_kind::none;
  std::uint8_t flags = 0;       ///< flag_repeat
  std::uint32_t non_finite = 0; ///< call_site::non_finite: a parameter whose gradient holds NaN/Inf, plus one
  std::uint32_t reserved = 0;

  /// This rank's gradients hold what its last synchronize() left (call_site::repeat).
  static constexpr std::uint8_t flag_repeat = 1;
  /// And it knows: it marked every gradient of its last step, none since (call_site::certain_repeat).
  static constexpr std::uint8_t flag_certain_repeat = 2;
  /// This rank's arguments do not fit the collective (a buffer of the wrong
  /// size): it joins the round only so that every rank fails alike, at once.
  static constexpr std::uint8_t flag_refused = 4;

  bool operator==(const collective_header&) const = default;

  /// Whether a peer's header describes the same collective: every field equal,
  /// and the call site too where both name one (a rank that joined runs its
  /// stand-ins unnamed, and so do a user's own collectives).
  bool agrees_with(const collective_header& theirs) const {
    if (call == call_kind::none || theirs.call == call_kind::none) return unnamed() == theirs.unnamed();
    collective_header a = *this, b = theirs;
    a.flags = b.flags = 0; // per rank by nature
    a.non_finite = b.non_finite = 0;
    return a == b;
  }

  /// This header without its call site.
  collective_header unnamed() const {
    collective_header h = *this;
    h.step = 0;
    h.bucket = 0;
    h.call = call_kind::none;
    h.flags = 0;
    h.non_finite = 0;
    return h;
  }

  /// Every rank's header of one round, this rank's among them: throws the one
  /// error every rank throws alike, before any data moves, or returns when the
  /// round may go on. In order: a rank's gradient holding NaN or Inf
  /// (check_finite), ranks that disagree (at different steps: the rank out of
  /// step with the most is named), every rank repeating its last step.
  static void check_round(const std::string& what, int rank, const std::vector<ranked>& all) {
    const collective_header* mine = nullptr;
    for (auto& [r, h] : all)
      if (r == rank) mine = &h;
    if (!mine) return;
    for (auto& [r, h] : all)
      if (h.flags & flag_refused)
        detail::throw_error(error_kind::mismatch,
                            {what, ": rank ", r, " refused its part of ", to_string(h.kind),
                             ": its arguments do not fit it (rank ", r,
                             "'s error says how: a buffer of the wrong size, or counts per peer that do not "
                             "add up). Nothing moved. This group is unusable now: every later collective "
                             "throws; create a new group."},
                            r);
    for (auto& [r, h] : all)
      if (h.non_finite) throw non_finite_error(what, r, h);
    for (auto& [r, h] : all) {
      if (mine->agrees_with(h)) continue;
      if (mine->unnamed() == h.unnamed() && mine->call != call_kind::none && mine->call == h.call)
        throw step_mismatch(what, all);
      throw mine->mismatch(what, rank, r, h);
    }
    bool every_rank_repeats = true;
    for (auto& [r, h] : all)
      every_rank_repeats = every_rank_repeats && (h.flags & flag_repeat);
    if (!every_rank_repeats)
      for (auto& [r, h] : all)
        if (h.flags & flag_certain_repeat)
          detail::throw_error(
              error_kind::mismatch,
              {what, ": rank ", r,
               " called synchronize() again with no new gradients (it marked every gradient of "
               "its last step and none since, and they hold what that synchronize() left), "
               "while other ranks are at their next step: rank ",
               r, " called synchronize() once more than they did. Nothing was reduced. Look at rank ", r,
               "'s code first. This group is unusable now: every later collective throws; create "
               "a new group."},
              r);
    if (every_rank_repeats && mine->call != call_kind::none)
      detail::throw_error(
          error_kind::config,
          {what, ": synchronize() was called again on every rank with no new gradients: each rank's "
                 "gradients still hold what the last synchronize() left, so this one would reduce "
                 "reduced gradients (reduction::sum would double them). Nothing was reduced. Call "
                 "synchronize() once per step, after backward (or inside no_sync() to only "
                 "accumulate). This group is unusable now: every later collective throws; create a "
                 "new group."});
  }

  std::string describe() const {
    if (magic != expected_magic) return "something that is not a ddp collective header";
    std::string s = to_string(kind);
    if (call != call_kind::none)
      s = detail::message({to_string(call), " (step ", step, ", bucket ", bucket, ") ", s});
    if (kind == collective_kind::barrier) return s;
    if (kind == collective_kind::all_to_all_v) // its counts travel as the round's payload
      return detail::message({s, " of ", ddp::to_string(static_cast<dtype>(dt))});
    detail::append_message(s, {" of ", count, " x ", ddp::to_string(static_cast<dtype>(dt))});
    if (kind == collective_kind::all_reduce || kind == collective_kind::reduce_scatter ||
        kind == collective_kind::reduce)
      detail::append_message(s, {" (op ", ddp::to_string(static_cast<op>(reduce)), ")"});
    if (kind == collective_kind::broadcast || kind == collective_kind::scatter)
      detail::append_message(s, {" from root ", root});
    if (kind == collective_kind::gather || kind == collective_kind::reduce)
      detail::append_message(s, {" to root ", root});
    if (kind == collective_kind::all_reduce && in_place)
      detail::append_message(s, {" in place in ddp::shm_array ", root, " at byte ", shm_shape,
                                 " (every rank must pass the same part of its own shm array)"});
    else if (kind == collective_kind::all_reduce && shm_shape)
      detail::append_message(s, {" (shm step ", shm_shape, " B)"});
    else if ((kind == collective_kind::reduce_scatter || kind == collective_kind::all_gather) && shm_shape)
      s += " (through the node's shared memory)";
    if (piece) detail::append_message(s, {" (piece ", piece, " B)"});
    return s;
  }

  /// What to add to a mismatch message when the same collective differs only
  /// in how it travels: one rank in the node's shared memory and the other
  /// over TCP, or different ring pieces.
  std::string hint_against(const collective_header& theirs) const {
    const bool same_call = kind == theirs.kind && count == theirs.count && dt == theirs.dt &&
                           reduce == theirs.reduce && root == theirs.root;
    if (!same_call) return "";
    if ((shm_shape == 0) != (theirs.shm_shape == 0) && !in_place && !theirs.in_place)
      return " Some ranks take the node's shared memory and others TCP: call use_shm with the same value on "
             "every rank.";
    if (piece != theirs.piece)
      return " The ranks set different piece sizes: call set_ring_piece_bytes with the same value on every "
             "rank.";
    return "";
  }

  /// The error when rank `peer` runs `theirs` while this rank (`rank`) runs
  /// this collective; `what` names the collective.
  error mismatch(const std::string& what, int rank, int peer, const collective_header& theirs) const {
    return error(
        error_kind::mismatch,
        detail::message(
            {what, ": ranks called different collectives: this rank (", rank, ") called ", describe(),
             ", rank ", peer, " called ", theirs.describe(),
             ". Every rank must call the same collectives in the same order with the same counts, "
             "dtypes, ops and roots.",
             hint_against(theirs),
             " This group is unusable now: every later collective throws this error; create a new group."}),
        peer);
  }

  /// The same bucket of different steps. The rank named is the first whose
  /// step differs from the step most ranks are at (a tie: from the lowest, so
  /// of two ranks the one ahead, which entered no_sync() or called
  /// synchronize() alone). Every rank holds every header: all name the same.
  static error step_mismatch(const std::string& what, const std::vector<ranked>& all) {
    std::map<std::uint32_t, int> at;
    for (auto& [r, h] : all)
      ++at[h.step];
    std::uint32_t most = 0;
    int count = -1;
    for (auto& [step, n] : at)
      if (n > count) most = step, count = n;
    int culprit = -1;
    std::uint32_t theirs = 0;
    for (auto& [r, h] : all)
      if (h.step != most && (culprit < 0 || r < culprit)) culprit = r, theirs = h.step;
    const bool ahead = theirs > most;
    const auto gap = ahead ? theirs - most : most - theirs;
    const auto call = all.front().second.call;
    return error(error_kind::mismatch,
                 detail::message(
                     {what,
                      ": the ranks are at different steps of ",
                      to_string(call),
                      ": rank ",
                      culprit,
                      " is at step ",
                      theirs,
                      ", ",
                      (count > 1 ? detail::message({count, " ranks"}) : std::string("the other")),
                      " at step ",
                      most,
                      ". Rank ",
                      culprit,
                      " counted ",
                      gap,
                      " synchronize() call(s) ",
                      (ahead ? "more" : "fewer"),
                      ": no_sync() entered, or synchronize() called, on some ranks only, or a different "
                      "number of times. Every rank must enter no_sync() and call synchronize() for the same "
                      "steps; look at rank ",
                      culprit,
                      "'s code first. This group is unusable now: every later collective throws this error; "
                      "create a new group."}),
                 culprit);
  }

  /// A rank found NaN or Inf in its gradients (ddp_options::check_finite).
  static error non_finite_error(const std::string& what, int culprit, const collective_header& h) {
    std::string name = detail::message({"#", h.non_finite - 1});
    if (current_call.parameter_name)
      name = detail::message({"'", current_call.parameter_name(current_call.names, h.non_finite - 1), "'"});
    return error(
        error_kind::data,
        detail::message({what, ": rank ", culprit, "'s gradient of parameter ", name,
                         " holds a NaN or Inf at step ", h.step,
                         ", found before its reduction (ddp_options::check_finite): rank ", culprit,
                         " produced it, and no rank reduced it. Look at rank ", culprit,
                         "'s loss and inputs of that step. This group is unusable now; create a new group."}),
        culprit);
  }
};
using ranked_header = collective_header::ranked;
static_assert(sizeof(collective_header) == 56,
              "collective_header is sent as raw bytes: keep it padding-free");

/// One all-to-all round of headers, each followed by an optional payload of at
/// most inline_cap bytes. The buffers are kept across collectives (worker thread only).
class header_round {
public:
  /// The largest payload that travels with the header at world size w: 64 KiB
  /// up to 4 ranks, then less, so that a rank posts at most ~192 KiB of receive
  /// space and sends each peer's share directly only while that is cheaper than
  /// the ring's 2(W-1) steps (never under 4 KiB). Every rank computes the same.
  static constexpr std::size_t inline_cap(int w) {
    const std::size_t peers = w > 1 ? static_cast<std::size_t>(w - 1) : 1;
    // Whole cache lines, so that every payload after a 56-byte header stays
    // 8-byte aligned for the typed reductions (39321 B at 6 ranks was not).
    return std::max(std::size_t{4} << 10, std::min(std::size_t{64} << 10, (std::size_t{192} << 10) / peers)) /
           64 * 64;
  }
  static constexpr std::size_t slot_bytes(int w) { return sizeof(collective_header) + inline_cap(w); }

  /// Sends `mine` to every peer, each followed by payload_for(peer) (a
  /// {pointer, bytes} pair, bytes <= inline_cap(w)), and receives every peer's.
  /// Throws ddp::error(mismatch) if any peer's header differs from `mine`.
  /// `waits` registers the round's buffers, so that another thread can end its waits.
  template <class Payload>
  void run(const std::shared_ptr<::gloo::Context>& ctx, gloo_waits& waits, const collective_header& mine,
           Payload&& payload_for, std::chrono::milliseconds timeout, const std::string& what) {
    const int w = ctx->size, r = ctx->rank;
    const auto slot = ::gloo::Slot::build(header_slot_prefix, mine.tag);
    const gloo_deadline deadline(timeout);
    slot_ = slot_bytes(w);
    const std::size_t total = static_cast<std::size_t>(w) * slot_;
    if (recv_.size() < total) recv_.resize(total);
    if (send_.size() < total) send_.resize(total);
    auto in = waits.make(*ctx, recv_.data(), total);
    auto out = waits.make(*ctx, send_.data(), total);
    for (int p = 0; p < w; ++p)
      if (p != r) in->recv(p, slot, at(p), slot_);
    for (int p = 0; p < w; ++p) {
      if (p == r) continue;
      auto [data, bytes] = payload_for(p);
      if (bytes > inline_cap(w))
        detail::throw_error(error_kind::backend, {what, ": internal error: inline payload over the cap"});
      char* dst = send_.data() + at(p);
      std::memcpy(dst, &mine, sizeof mine);
      if (bytes) std::memcpy(dst + sizeof mine, data, bytes);
      out->send(p, slot, at(p), sizeof mine + bytes);
    }
    for (int p = 0; p + 1 < w; ++p)
      gloo_deadline::check(in->waitRecv(deadline.remaining()), "header receive");
    for (int p = 0; p + 1 < w; ++p)
      gloo_deadline::check(out->waitSend(deadline.remaining()), "header send");
    all_.clear();
    all_.emplace_back(name(r), mine);
    for (int p = 0; p < w; ++p) {
      if (p == r) continue;
      collective_header theirs;
      std::memcpy(&theirs, recv_.data() + at(p), sizeof theirs);
      all_.emplace_back(name(p), theirs);
    }
    collective_header::check_round(what, name(r), all_);
  }

  /// A subgroup's members as the job numbers them (rendezvous::job_ranks):
  /// a mismatch's rank and text then name job ranks, as over shared memory.
  void name_ranks(std::vector<int> job_ranks) { names_ = std::move(job_ranks); }

  /// The payload peer p sent, valid until the next run().
  const char* payload(int p) const { return recv_.data() + at(p) + sizeof(collective_header); }
  /// Room for one payload of this rank's own (e.g. to reduce all ranks' in rank order).
  char* own_slot(int r) { return recv_.data() + at(r) + sizeof(collective_header); }

private:
  std::size_t at(int p) const { return static_cast<std::size_t>(p) * slot_; }
  int name(int p) const { return names_.empty() ? p : names_[static_cast<std::size_t>(p)]; }
  std::vector<char> recv_, send_;
  std::vector<int> names_;         ///< empty: the context's ranks are the job's
  std::vector<ranked_header> all_; ///< the last round's headers (kept: no allocation per round)
  std::size_t slot_ = 0;           // slot_bytes(w) of the last run
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_GLOO_HEADER_HPP
