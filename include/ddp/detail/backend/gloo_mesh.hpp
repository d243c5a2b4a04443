// ddp's own full mesh of Gloo TCP pairs, in place of Gloo's
// rendezvous::Context::connectFullMesh (Debian's Gloo, 2022-05), which
//  - stores each rank's N-1 pair addresses under one key and has every rank
//    read every key whole: the store serves ~136·N³ bytes (35 MB at 64 ranks,
//    281 MB at 128, 2.3 GB at 256: bench_gloo_mesh);
//  - first reads, one round trip each, the host name of every lower rank, for
//    a local rank its TCP transport never uses;
//  - connects its pairs in rank order, so a rank that listens for a peer waits
//    until that peer's own loop reaches it;
//  - reports a failed connection without saying to whom, after waiting five
//    times DDP_TIMEOUT for it.
// Here each rank stores one key per peer, "<from>/<to>": the address of its
// pair for that peer, so a rank reads N-1 addresses (~136·N² bytes served in
// all); it first dials the peers it connects to (each dial completes against
// a listener that exists since the peer published its address), then waits
// for those that dial it, for DDP_TIMEOUT at most; and a failure names the
// peer and its address. (With file://, Gloo's file store, each rank stores one
// list as Gloo did: see gloo_mesh_keys.)
#ifndef DDP_DETAIL_BACKEND_GLOO_MESH_HPP
#define DDP_DETAIL_BACKEND_GLOO_MESH_HPP

#include <ddp/detail/backend/connect_interrupt.hpp>
#include <ddp/detail/backend/gloo_loop_ticker.hpp>
#include <ddp/detail/common/env.hpp>

#include <gloo/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/context.h>
#include <gloo/transport/device.h>
#include <gloo/transport/tcp/address.h>

#include <algorithm>
#include <arpa/inet.h>
#include <chrono>
#include <cstring>
#include <memory>
#include <netinet/in.h>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

/// The store key under which rank `from` publishes its pair's address for `to`.
inline std::string gloo_mesh_key(int from, int to) { return std::to_string(from) + "/" + std::to_string(to); }

/// The IP part of a socket address: its family, address bytes and port (in
/// network byte order); an empty address for other families.
struct ip_parts {
  int family = AF_UNSPEC;
  const void* address = nullptr;
  std::size_t address_bytes = 0;
  in_port_t port = 0;
};

inline ip_parts ip_parts_of(const sockaddr_storage& ss) {
  if (ss.ss_family == AF_INET) {
    const auto& a = reinterpret_cast<const sockaddr_in&>(ss);
    return {AF_INET, &a.sin_addr, sizeof a.sin_addr, a.sin_port};
  }
  if (ss.ss_family == AF_INET6) {
    const auto& a = reinterpret_cast<const sockaddr_in6&>(ss);
    return {AF_INET6, &a.sin6_addr, sizeof a.sin6_addr, a.sin6_port};
  }
  return {};
}

/// Whether Gloo's TCP pair at `self` dials `peer` (rather than listening for
/// it): Gloo's own rule (tcp::Pair::connect), the larger address dials. Only
/// the order of the connect calls depends on it, never their outcome.
inline bool gloo_pair_dials(const std::vector<char>& self, const std::vector<char>& peer) {
  const ::gloo::transport::tcp::Address self_at(self), peer_at(peer);
  const ip_parts a = ip_parts_of(self_at.getSockaddr()), b = ip_parts_of(peer_at.getSockaddr());
  if (a.family != b.family || a.family == AF_UNSPEC) return false;
  int cmp = std::memcmp(a.address, b.address, a.address_bytes);
  if (cmp == 0) cmp = static_cast<int>(a.port) - static_cast<int>(b.port); // as Gloo: network byte order
  return cmp > 0;
}

/// "[address]:port" of a Gloo TCP address. Gloo's own Address::str() prints
/// the port in network byte order (40000 as 16540).
inline std::string gloo_address_text(const std::vector<char>& bytes) {
  const ::gloo::transport::tcp::Address at(bytes);
  const ip_parts ip = ip_parts_of(at.getSockaddr());
  char host[INET6_ADDRSTRLEN] = "?";
  if (ip.family != AF_UNSPEC) ::inet_ntop(ip.family, ip.address, host, sizeof host);
  return "[" + std::string(host) + "]:" + std::to_string(ntohs(ip.port));
}

/// Where the mesh's addresses go in the store. A key per pair suits ddp's
/// TCP store (a rank waits on all of its keys in one round trip and reads
/// N-1 addresses); Gloo's file store (file://) polls each key of a wait as a
/// file every 10 ms and keeps every key as a file, so there each rank stores
/// one list (N files, not N(N-1)) and waits for one peer's at a time.
enum class gloo_mesh_keys { per_pair, per_rank };

/// A wait for a peer's connection that ran its whole timeout: that peer (or
/// the network to it) is to blame, not this rank (process_group then reports
/// nothing in this rank's name).
class gloo_mesh_timeout : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// A Gloo context whose pairs ddp connects (see the top of this file). Gloo's
/// algorithms and ddp's own use it like any gloo::Context.
class gloo_mesh_context final : public ::gloo::Context {
public:
  gloo_mesh_context(int this_rank, int ranks, std::chrono::milliseconds timeout)
      : ::gloo::Context(this_rank, ranks) {
    setTimeout(timeout);
  }

  gloo_mesh_context(const gloo_mesh_context&) = delete;
  gloo_mesh_context& operator=(const gloo_mesh_context&) = delete;

  /// Closes the pairs while the loop ticks fast (gloo_loop_ticker.hpp), before
  /// Gloo's Context would close them one 10 ms tick at a time, then lets the
  /// ticker stop the device's loop (another tick). Where a Gloo buffer still
  /// holds the pairs' context, they are left to Gloo, to close when it goes.
  ~gloo_mesh_context() override {
    if (!ticker_) return; // never connected: nothing here is ddp's
    if (transportContext_ && transportContext_.use_count() == 1) close_pairs(*transportContext_);
    transportContext_.reset();
    device_.reset();
    ticker_.reset(); // holds the device last, unless another holder still does
  }

  /// Connects a pair to every other rank through `store` (keys relative to
  /// it). Throws std::runtime_error naming the peer whose connection failed;
  /// a store that times out throws what it throws (ddp::error for ddp's).
  /// `interrupt` (may be null): another thread's way to stop the waits for
  /// connections, when another rank has failed (connect_interrupt.hpp); then
  /// this throws, naming the peer it was connecting with and why it stopped.
  /// A wait for a connection that ran its whole timeout throws
  /// gloo_mesh_timeout. A context that failed keeps its pairs until it goes
  /// (ddp::gloo first looks for a lost peer, for up to a second): a peer
  /// dialing this rank meanwhile still connects, rather than finding its dial
  /// refused and looking like the rank that failed.
  void connect(::gloo::rendezvous::Store& store, const std::shared_ptr<::gloo::transport::Device>& device,
               gloo_mesh_keys keys = gloo_mesh_keys::per_pair, connect_interrupt* interrupt = nullptr) {
    ticker_ = std::make_unique<gloo_loop_ticker>(device);
    device_ = device;
    transportContext_ = device->createContext(rank, size);
    connect_pairs(store, *transportContext_, keys, interrupt);
  }

  /// Fails every connection of the context at once, from any thread, while a
  /// collective may be running on it (see fail_pairs).
  void fail_connections() noexcept {
    if (transportContext_) fail_pairs(*transportContext_);
  }

private:
  using addresses = std::vector<std::vector<char>>; ///< by peer rank; this rank's empty

  void connect_pairs(::gloo::rendezvous::Store& store, ::gloo::transport::Context& pairs, gloo_mesh_keys keys,
                     connect_interrupt* interrupt) {
    // Gloo waits five times a pair's timeout for its connection (tcp::Pair::
    // waitUntil, "a longer timeout when waiting for initial connect"): seen as
    // 30 s at DDP_TIMEOUT=6s for a rank whose peer never dialed. Pairs get a
    // fifth, so the wait is the timeout. Once connected, a pair's own timeout
    // serves only Gloo's sync mode, which ddp does not use; the context's,
    // restored below, is the default of the unbound buffers' waits.
    pairs.setTimeout(std::max(std::chrono::milliseconds(1), getTimeout() / 5));
    for (int peer = 0; peer < size; ++peer)
      if (peer != rank) pairs.createPair(peer);
    pairs.setTimeout(getTimeout());
    // From here the pairs stay where they are, so another thread may close them.
    std::optional<connect_interrupt::registration> stop;
    if (interrupt) stop.emplace(*interrupt, [this, &pairs](const std::string&) { fail_pairs(pairs); });
    auto address =
        keys == gloo_mesh_keys::per_pair ? exchange_per_pair(store, pairs) : exchange_per_rank(store, pairs);
    // Dial first, then listen: no rank waits on another's progress through its loop.
    for (bool dialing : {true, false})
      for (int peer = 0; peer < size; ++peer) {
        if (peer == rank) continue;
        auto& pair = pairs.getPair(peer);
        const auto& at = address[static_cast<std::size_t>(peer)];
        if (gloo_pair_dials(pair->address().bytes(), at) != dialing) continue;
        auto failed = [&](const std::string& what) {
          return std::runtime_error(std::string(dialing ? "connecting to" : "waiting for a connection from") +
                                    " rank " + std::to_string(peer) + " (its pair at " +
                                    gloo_address_text(at) + ", this rank's at " +
                                    gloo_address_text(pair->address().bytes()) + "): " + what);
        };
        auto stopped = [&] { return interrupt ? interrupt->why() : std::nullopt; };
        if (auto why = stopped()) throw failed("stopped: " + *why);
        const auto started = std::chrono::steady_clock::now();
        try {
          pair->connect(at); // throws at once once fail_pairs ran
        } catch (const std::exception& e) {
          if (auto why = stopped()) throw failed("stopped: " + *why); // Gloo's text: fail_pairs' own probe
          // Gloo's "Connect timeout" (an IoException like any other) after the whole wait.
          if (std::chrono::steady_clock::now() - started >= getTimeout() * 9 / 10)
            throw gloo_mesh_timeout(failed(e.what()).what());
          throw failed(e.what());
        }
        if (auto why = stopped()) throw failed("stopped: " + *why);
      }
  }

  /// Fails every pair of `pairs` at once, from any thread: Gloo does this
  /// itself when a wait on one of its buffers times out (it sets an error on
  /// every pair, failing every send and receive still queued there and a
  /// wait for a connection, waking their waiters, and closes the sockets
  /// without SO_LINGER), so a wait of 1 ms on a buffer nothing is sent to
  /// does it, through Gloo's public API (Debian's Gloo lacks headers to reach
  /// a TCP pair's own failure). Closing alone (Pair::close) is no substitute:
  /// it wakes no collective (the running one, and the teardown behind it,
  /// then waited out the whole timeout), and its reset (SO_LINGER 0) reached
  /// peers' Gloo loops while they accepted those connections, whose
  /// getpeername then failed: an exception on Gloo's loop thread, which ends
  /// that process (a reviewer's probe: 6 runs in 100 of an interrupted
  /// connect). A listener closed here still resets a connection the kernel
  /// queued but Gloo had not accepted; the peer's Gloo sees that in its
  /// connect (SO_ERROR) but for a window of two system calls (a second
  /// reviewer's probe: 6 such resets in 120 rounds, no crash), the same
  /// window any process exiting during Gloo's connect opens.
  /// Gloo fails the pairs one after another, each waiting for its loop, so
  /// the loop ticks fast meanwhile.
  void fail_pairs(::gloo::transport::Context& pairs) noexcept {
    gloo_loop_ticker::burst quick(*ticker_);
    char nothing = 0;
    try {
      auto probe = pairs.createUnboundBuffer(&nothing, 1);
      probe->waitRecv(nullptr, std::chrono::milliseconds(1));
    } catch (const std::exception&) {} // the timeout it is for
  }

  /// Closes every pair of `pairs` while the loop ticks fast.
  void close_pairs(::gloo::transport::Context& pairs) noexcept {
    gloo_loop_ticker::burst quick(*ticker_);
    for (int peer = 0; peer < size; ++peer)
      pairs.getPair(peer).reset(); // this rank's own is empty already
  }

  addresses exchange_per_pair(::gloo::rendezvous::Store& store, ::gloo::transport::Context& pairs) const {
    std::vector<std::string> theirs;
    for (int peer = 0; peer < size; ++peer) {
      if (peer == rank) continue;
      store.set(gloo_mesh_key(rank, peer), pairs.getPair(peer)->address().bytes());
      theirs.push_back(gloo_mesh_key(peer, rank));
    }
    store.wait(theirs, getTimeout()); // one round trip for all of them
    addresses at(static_cast<std::size_t>(size));
    for (int peer = 0; peer < size; ++peer)
      if (peer != rank) at[static_cast<std::size_t>(peer)] = store.get(gloo_mesh_key(peer, rank));
    return at;
  }

  addresses exchange_per_rank(::gloo::rendezvous::Store& store, ::gloo::transport::Context& pairs) const {
    std::vector<char> mine;
    for (int peer = 0; peer < size; ++peer)
      if (peer != rank) {
        auto a = pairs.getPair(peer)->address().bytes();
        mine.insert(mine.end(), a.begin(), a.end());
      }
    store.set(std::to_string(rank), mine);
    addresses at(static_cast<std::size_t>(size));
    for (int peer = 0; peer < size; ++peer) {
      if (peer == rank) continue;
      store.wait({std::to_string(peer)}, getTimeout());
      auto list = store.get(std::to_string(peer));
      const std::size_t entry = list.size() / static_cast<std::size_t>(size - 1);
      if (entry == 0 || entry * static_cast<std::size_t>(size - 1) != list.size())
        throw std::runtime_error("rank " + std::to_string(peer) + "'s list of pair addresses has " +
                                 std::to_string(list.size()) + " bytes, not one entry per peer");
      const std::size_t slot =
          static_cast<std::size_t>(rank < peer ? rank : rank - 1); // peers skip themselves
      at[static_cast<std::size_t>(peer)].assign(list.begin() + static_cast<std::ptrdiff_t>(slot * entry),
                                                list.begin() +
                                                    static_cast<std::ptrdiff_t>((slot + 1) * entry));
    }
    return at;
  }

  std::unique_ptr<gloo_loop_ticker> ticker_; ///< outlives the pairs: the destructor closes them first
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_BACKEND_GLOO_MESH_HPP
