// The rendezvous store's wire format. A frame is a little-endian u32 length
// followed by that many bytes: a one-byte opcode, then fields. Strings and
// byte blobs are a u32 length plus bytes; integers are fixed-width.
#ifndef DDP_DETAIL_STORE_PROTOCOL_HPP
#define DDP_DETAIL_STORE_PROTOCOL_HPP

#include <ddp/config.hpp>
#include <ddp/detail/common/message.hpp>

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

// A connection starts with the handshake of auth.hpp: hello, then proof; any
// other first frame closes it.
enum class store_op : std::uint8_t {
  hello = 1, ///< rank (i32), client nonce -> ok, server nonce, server proof
  set = 2,   ///< key, value
  get = 3,   ///< key -> found(u8) [value]
  wait = 4,  ///< count (u32), keys, timeout_ms (u64) -> ok(u8)
  add = 5,   ///< key, delta (i64) -> new value (i64)
  check = 6, ///< count, keys -> all present (u8)
  bye = 7,   ///< orderly goodbye: this rank is not lost
  proof = 8, ///< client proof -> ok | refused
  /// scope (bytes) -> ok: this connection's keys carry that prefix (a restart
  /// round's, "r1/"), so its loss is recorded under scope + store_lost_key and
  /// cuts short only waits of the same scope (a rank lost in round 0 must not
  /// end round 1's waits).
  scope = 9,
  /// rank (i32) -> ok: this connection, registered as no rank, belongs to
  /// that rank's process (its peer-failure watch): its drop is still nobody's
  /// loss, but rank 0's linger stops waiting for it when it stops waiting for
  /// that rank (store_stalled_prefix).
  owner = 10,
  /// key, expected, desired -> ok, value | missing: sets `desired` when the key holds
  /// `expected` (absent counts as holding "" only), atomically; answers the value standing
  /// after it. Set-if-absent is expected "": the first writer's value stands (PyTorch's
  /// TCPStore compareSet).
  compare_set = 11,
};

/// `lost` answers a pending wait (then i32: the rank) as soon as a rank drops
/// without a goodbye: the keys it would have set will never come. `unknown_request`
/// answers an opcode this server does not know (a client of a newer version): the
/// connection stays, and its rank is not lost.
enum class store_status : std::uint8_t {
  ok = 0,
  missing = 1,
  timeout = 2,
  refused = 3,
  lost = 4,
  unknown_request = 5
};

/// Frames above this size are malformed by definition and close the connection.
/// The server records, under this key, each rank whose connection dropped
/// without a goodbye; clients read it to name the rank a job lost.
inline constexpr const char* store_lost_key = "ddp/lost";

/// Keys under this prefix serve failure diagnostics (who failed, who reached
/// which collective): waits on them are never cut short by a lost rank.
inline constexpr std::string_view store_fault_prefix = "ddp/fault/";

/// A rank that fails on its own sets `store_failed_prefix + rank` to its
/// reason; the server then records that rank as lost, like a dropped one.
inline constexpr std::string_view store_failed_prefix = "ddp/fault/failed/";

/// A rank whose host stopped acknowledging its store connection (see set_keepalive):
/// the server sets `store_unreachable_prefix + rank` to the reason when it records it lost.
inline constexpr std::string_view store_unreachable_prefix = "ddp/fault/unreachable/";

/// Each survivor's progress for the desync report (detail/fault/desync.hpp),
/// under `store_progress_prefix + rank`.
inline constexpr std::string_view store_progress_prefix = "ddp/fault/progress/";

/// A survivor whose desync report found a rank silent (stopped or hung) sets
/// `store_stalled_prefix + rank`: rank 0's store then stops lingering for that
/// rank's connections, which a stopped process holds open without ever
/// reading the failure they would linger for.
inline constexpr std::string_view store_stalled_prefix = "ddp/fault/stalled/";

/// A rank that leaves a subgroup on an error of its own (the job goes on)
/// sets `store_left_prefix + key_prefix + rank` to its reason before it
/// closes the subgroup's connections: its peers there name it at once.
inline constexpr std::string_view store_left_prefix = "ddp/fault/left/";

/// A rank whose process group ends normally says so under `store_finished_prefix + rank`
/// before it leaves: a peer still waiting for it in a collective then says that it
/// finished (the peer called one collective more), not that it failed.
inline constexpr std::string_view store_finished_prefix = "ddp/finished/";

/// What a rank still in a collective says of a peer whose process group ended
/// (store_finished_prefix): not a failure of the peer, and not a verdict.
inline std::string finished_peer_note(int peer, int rank) {
  const std::string p = std::to_string(peer), r = std::to_string(rank);
  return detail::message(
      {"rank ", p, " left: its process group ended without an exception in flight (it finished, or ",
       "caught an error of its own: see its output) while rank ", r,
       " was still in this call. The ranks called different numbers of collectives (or synchronize()): ",
       "rank ", r, " at least one more than rank ", p});
}

inline constexpr std::uint32_t store_max_frame = 256u << 20;

/// Keys a wait or check may name in one frame; tcp_store splits longer lists.
inline constexpr std::uint32_t store_max_keys_per_frame = 65536;

class frame_writer {
public:
  explicit frame_writer(store_op op) {
    buf_.resize(4);
    buf_.push_back(static_cast<char>(op));
  }
  explicit frame_writer(store_status st) {
    buf_.resize(4);
    buf_.push_back(static_cast<char>(st));
  }
  frame_writer& u8(std::uint8_t v) { return raw(&v, 1); }
  frame_writer& u32(std::uint32_t v) { return raw(&v, 4); }
  frame_writer& i32(std::int32_t v) { return raw(&v, 4); }
  frame_writer& u64(std::uint64_t v) { return raw(&v, 8); }
  frame_writer& i64(std::int64_t v) { return raw(&v, 8); }
  frame_writer& bytes(std::string_view s) {
    u32(static_cast<std::uint32_t>(s.size()));
    return raw(s.data(), s.size());
  }
  /// The finished frame, length prefix filled in; the writer is spent after this.
  std::vector<char> finish() {
    auto n = static_cast<std::uint32_t>(buf_.size() - 4);
    std::memcpy(buf_.data(), &n, 4);
    return std::move(buf_);
  }

private:
  /// resize + memcpy, not vector::insert of a range: GCC 12 at -O3 warns
  /// (-Warray-bounds) inside insert's inlined reallocation, a false positive.
  frame_writer& raw(const void* p, std::size_t n) {
    if (n == 0) return *this;
    const std::size_t at = buf_.size();
    buf_.resize(at + n);
    std::memcpy(buf_.data() + at, p, n);
    return *this;
  }
  std::vector<char> buf_;
};

/// Reads fields from a frame body; every read is bounds-checked, and a short
/// frame makes `ok()` false instead of reading past the end.
class frame_reader {
public:
  explicit frame_reader(std::string_view body) : s_(body) {}
  bool ok() const { return ok_; }
  bool at_end() const { return s_.empty(); }
  std::uint8_t u8() { return fixed<std::uint8_t>(); }
  std::uint32_t u32() { return fixed<std::uint32_t>(); }
  std::int32_t i32() { return fixed<std::int32_t>(); }
  std::uint64_t u64() { return fixed<std::uint64_t>(); }
  std::int64_t i64() { return fixed<std::int64_t>(); }
  std::string bytes() {
    std::uint32_t n = u32();
    if (!ok_ || n > s_.size()) {
      ok_ = false;
      return {};
    }
    std::string out(s_.substr(0, n));
    s_.remove_prefix(n);
    return out;
  }

private:
  template <class T> T fixed() {
    T v{};
    if (s_.size() < sizeof(T)) {
      ok_ = false;
      return v;
    }
    std::memcpy(&v, s_.data(), sizeof(T));
    s_.remove_prefix(sizeof(T));
    return v;
  }
  std::string_view s_;
  bool ok_ = true;
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_STORE_PROTOCOL_HPP
