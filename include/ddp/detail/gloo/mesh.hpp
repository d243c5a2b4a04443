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
// all), all of them in one round trip through ddp's store (gloo_batch_store);
// it first dials the peers it connects to (each dial completes against
// a listener that exists since the peer published its address), then waits
// for those that dial it, for DDP_TIMEOUT at most; and a failure names the
// peer and its address. (With file://, Gloo's file store, each rank stores one
// list as Gloo did: see gloo_mesh_keys.)
#ifndef DDP_DETAIL_GLOO_MESH_HPP
#define DDP_DETAIL_GLOO_MESH_HPP

#include <ddp/detail/common/env.hpp>
#include <ddp/detail/common/message.hpp>
#include <ddp/detail/fault/connect_interrupt.hpp>
#include <ddp/detail/gloo/batch_store.hpp>
#include <ddp/detail/gloo/loop_ticker.hpp>

#include <gloo/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/context.h>
#include <gloo/transport/device.h>
#include <gloo/transport/tcp/address.h>

#include <algorithm>
#include <arpa/inet.h>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <netinet/in.h>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

/// The store key under which rank `from` publishes its pair's address for `to`.
inline std::string gloo_mesh_key(int from, int to) { return detail::message({from, "/", to}); }

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
  // Appended, not "[" + std::string(host): g++ 12 at -O3 reports a false -Wrestrict inside that
  // operator+ (GCC bug 105329).
  std::string text = "[";
  text += host;
  text += "]:";
  text += std::to_string(ntohs(ip.port));
  return text;
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

  /// Set before connect(): move the device's loop thread to SCHED_BATCH
  /// (gloo_loop_batch_wanted, detail/gloo/loop_ticker.hpp).
  bool batch_loop = false;

  /// Closes the pairs while the loop ticks fast (detail/gloo/loop_ticker.hpp), before
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
  /// A wait for a connection that ran its whole timeout throws
  /// gloo_mesh_timeout. A context that failed keeps its pairs until it goes
  /// (ddp::gloo first looks for a lost peer, for up to a second): a peer
  /// dialing this rank meanwhile still connects, rather than finding its dial
  /// refused and looking like the rank that failed.
  ///
  /// `interrupt` (may be null) brings the news of a rank lost meanwhile
  /// (detail/fault/connect_interrupt.hpp). Then a wait for the lost rank's dial ends (the
  /// listener here closes: see on_news), and the connections with the living
  /// peers go on forming; once they have (or when none has formed for
  /// `living_peers_grace`, a peer being stuck or failed too: then every pair
  /// fails), this throws, naming the lost rank and why it stopped (and this
  /// rank's own failure since, if any). Failing every pair at
  /// the news instead (Gloo's own failure path) closed listeners that living
  /// peers were dialing; a connection the kernel had queued there was reset,
  /// and a peer's Gloo loop that met the reset between two system calls of
  /// its connect threw on its own thread, which ended that process (3 runs in
  /// 25 of a test interrupting every rank 50 times, beside a CPU hog).
  /// `store_ranks`: this mesh's rank r is the store's (job) rank
  /// store_ranks[r], so that the news names it (a subgroup's mesh, the nodes'
  /// leaders' mesh); empty: rank r itself.
  void connect(::gloo::rendezvous::Store& store, const std::shared_ptr<::gloo::transport::Device>& device,
               gloo_mesh_keys keys = gloo_mesh_keys::per_pair, connect_interrupt* interrupt = nullptr,
               std::vector<int> store_ranks = {}) {
    ticker_ = std::make_unique<gloo_loop_ticker>(device, batch_loop);
    device_ = device;
    transportContext_ = device->createContext(rank, size);
    connect_pairs(store, *transportContext_, keys, interrupt, store_ranks);
  }

  /// Once a lost rank is reported during the connect, how long this rank's
  /// waits may go without one of them ending before they all fail: the
  /// living peers need only their own remaining connects then, each a
  /// handshake with a listener that exists, so they keep connections forming;
  /// a peer whose connection does not form is stuck or failed too. A grace
  /// from the news on, however many connects were left, fails living ranks of
  /// a large job on a loaded host
  /// (docs/design-notes.md, "Note [connect grace]").
  static constexpr std::chrono::milliseconds living_peers_grace{2000};

  /// How long a connect that failed waits for news before it counts as this
  /// rank's own failure: the news reaches every rank from one store answer,
  /// but a peer that heard it first may have connected and left already.
  static constexpr std::chrono::milliseconds news_look{250};

  /// Fails every connection of the context at once, from any thread, while a
  /// collective may be running on it (see fail_pairs).
  void fail_connections() noexcept {
    if (transportContext_) fail_pairs(*transportContext_);
  }

private:
  using addresses = std::vector<std::vector<char>>; ///< by peer rank; this rank's empty

  /// What the connect and its stop (on the thread bringing the news) share.
  struct connect_progress {
    std::mutex mu;
    std::condition_variable leaving_cv;
    int listening_for = -1; ///< the peer whose dial this rank's connect waits for now
    std::optional<connect_interrupt::news> news;
    int lost = -1; ///< the lost rank's rank in this mesh, if it is one of its peers
    std::chrono::steady_clock::time_point last_formed; ///< after the news: when a wait last ended
    std::string also_failed;                           ///< the first failure of a connect after the news
    bool exchanging = true;  ///< the addresses are on their way: the grace waits for them
    bool failed_all = false; ///< the grace ran out: every pair failed
    bool leaving = false;    ///< connect_pairs is returning: the stop does nothing more
    std::thread grace;       ///< after the news: fails the waits left once none ended for the grace
  };

  void connect_pairs(::gloo::rendezvous::Store& store, ::gloo::transport::Context& pairs, gloo_mesh_keys keys,
                     connect_interrupt* interrupt, const std::vector<int>& store_ranks) {
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
    // This rank's pair addresses, read before they are published: once a peer
    // dials one, Gloo's loop rewrites it (to the connection's own address).
    addresses mine(static_cast<std::size_t>(size));
    for (int peer = 0; peer < size; ++peer)
      if (peer != rank) mine[static_cast<std::size_t>(peer)] = pairs.getPair(peer)->address().bytes();
    connect_progress progress;
    // From here the pairs stay where they are, so another thread may close them.
    std::optional<connect_interrupt::registration> stop;
    if (interrupt)
      stop.emplace(*interrupt,
                   [&](const connect_interrupt::news& n) { on_news(pairs, progress, n, store_ranks); });
    struct leave_on_return { // destroyed before `stop`: a stop running now returns, none starts a grace
      connect_progress& p;
      ~leave_on_return() {
        std::thread grace;
        {
          std::lock_guard lock(p.mu);
          p.leaving = true;
          grace = std::move(p.grace);
        }
        p.leaving_cv.notify_all();
        if (grace.joinable()) grace.join();
      }
    } leave{progress};
    auto address =
        keys == gloo_mesh_keys::per_pair ? exchange_per_pair(store, mine) : exchange_per_rank(store, mine);
    auto dials = [&](int peer) {
      return gloo_pair_dials(mine[static_cast<std::size_t>(peer)], address[static_cast<std::size_t>(peer)]);
    };
    auto failed = [&](int peer, const std::string& what) {
      return detail::message({dials(peer) ? "connecting to" : "waiting for a connection from", " rank ", peer,
                              " (its pair at ", gloo_address_text(address[static_cast<std::size_t>(peer)]),
                              ", this rank's at ", gloo_address_text(mine[static_cast<std::size_t>(peer)]),
                              "): ", what});
    };
    // The error once the news came: the lost rank's pair (this rank's own
    // failure after the news, if any, goes with it).
    auto stopped = [&](const std::string& what) {
      auto text = what;
      if (!progress.also_failed.empty()) text += "; before it stopped: " + progress.also_failed;
      return std::runtime_error(text);
    };
    {
      std::lock_guard lock(progress.mu);
      progress.exchanging = false;
      progress.last_formed = std::chrono::steady_clock::now(); // the exchange counts as progress
    }
    // Dial first, then listen: no rank waits on another's progress through its loop.
    for (bool dialing : {true, false})
      for (int peer = 0; peer < size; ++peer) {
        if (peer == rank || dials(peer) != dialing) continue;
        {
          std::lock_guard lock(progress.mu);
          if (peer == progress.lost) continue; // lost already: nothing to wait for
          progress.listening_for = dialing ? -1 : peer;
        }
        const auto started = std::chrono::steady_clock::now();
        std::string gloo_said;
        try {
          // Returns at once for a listening pair closed by on_news; throws
          // at once for a failed one.
          pairs.getPair(peer)->connect(address[static_cast<std::size_t>(peer)]);
        } catch (const std::exception& e) { gloo_said = e.what(); }
        std::unique_lock lock(progress.mu);
        progress.listening_for = -1;
        progress.last_formed = std::chrono::steady_clock::now();
        if (gloo_said.empty()) continue;
        if (!progress.news && interrupt) {
          // A living peer that heard the news first, connected and left closes
          // its connection: the news is near (the same store's answer, to
          // every rank), and with it this is no failure of this rank's own.
          lock.unlock();
          interrupt->wait_for_news(news_look);
          lock.lock();
        }
        if (progress.failed_all)
          throw stopped(failed(
              peer, detail::message({"stopped: ", progress.news->why, ", and no connection formed in the ",
                                     grace().count(), " ms after"})));
        if (progress.news) {
          // The waits for the other peers go on, so that a living peer still
          // dialing this rank does not find its listener closed (see connect).
          if (peer != progress.lost && progress.also_failed.empty())
            progress.also_failed = failed(peer, gloo_said);
          continue;
        }
        // Gloo's "Connect timeout" (an IoException like any other) after the whole wait.
        if (std::chrono::steady_clock::now() - started >= getTimeout() * 9 / 10)
          throw gloo_mesh_timeout(failed(peer, gloo_said));
        throw std::runtime_error(failed(peer, gloo_said));
      }
    std::lock_guard lock(progress.mu);
    if (!progress.news) return;
    if (progress.lost >= 0) throw stopped(failed(progress.lost, "stopped: " + progress.news->why));
    throw stopped("stopped: " + progress.news->why); // a rank outside this mesh
  }

  std::chrono::milliseconds grace() const { return std::min(living_peers_grace, getTimeout()); }

  /// The stop: ends a wait for the lost rank's dial by closing this rank's
  /// listener for it (Pair::close), which could reset only a connection from
  /// the lost rank (one it dialed before it failed; or, were it alive but
  /// reported lost, as a rank 0 that stopped answering, one it dials now); the
  /// connect loop skips the lost rank's pair if it has not reached it. A dial
  /// to the lost rank ends by itself (connected to a listener the failed rank
  /// keeps, or refused once it is gone) or with the grace: closing it with
  /// Gloo's reset reached the lost rank's Gloo while it accepted, between two
  /// system calls, which ended that process
  /// (docs/design-notes.md, "Note [failing Gloo pairs]"). Then starts
  /// the grace for the rest (news naming no rank of this mesh only that).
  void on_news(::gloo::transport::Context& pairs, connect_progress& progress,
               const connect_interrupt::news& n, const std::vector<int>& store_ranks) noexcept {
    std::lock_guard lock(progress.mu);
    if (progress.leaving || progress.news) return;
    progress.news = n;
    progress.last_formed = std::chrono::steady_clock::now();
    int lost = store_ranks.empty() ? n.lost_rank : -1;
    for (std::size_t r = 0; r < store_ranks.size(); ++r)
      if (store_ranks[r] == n.lost_rank) lost = static_cast<int>(r);
    if (lost >= 0) {
      if (lost != rank && lost < size) {
        progress.lost = lost;
        if (progress.listening_for == lost) {
          gloo_loop_ticker::burst quick(*ticker_); // closing waits for the loop to go round
          try {
            pairs.getPair(lost)->close();
          } catch (const std::exception&) {}
        }
      }
    }
    try {
      progress.grace = std::thread([this, &pairs, &progress] {
        std::unique_lock wait(progress.mu);
        for (;;) { // the store's own timeout bounds the exchange
          const auto now = std::chrono::steady_clock::now();
          const auto until = (progress.exchanging ? now : progress.last_formed) + grace();
          if (progress.leaving_cv.wait_until(wait, until, [&] { return progress.leaving; })) return;
          if (!progress.exchanging && progress.last_formed + grace() <= std::chrono::steady_clock::now())
            break;
        }
        progress.failed_all = true;
        fail_pairs(pairs);
      });
    } catch (const std::system_error&) { // no thread: no grace
      progress.failed_all = true;
      fail_pairs(pairs);
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
  /// that process. A listener closed here still resets a connection the kernel
  /// queued but Gloo had not accepted; the peer's Gloo sees that in its
  /// connect (SO_ERROR) but for a window of two system calls, the same window
  /// any process exiting during Gloo's connect opens (docs/design-notes.md,
  /// "Note [failing Gloo pairs]").
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

  /// Publishes `mine` (this rank's pair addresses, by peer) and returns the
  /// peers' for this rank. Through a gloo_batch_store (ddp's own store) that
  /// is three round trips (set all, wait for all, get all); through another
  /// Gloo store, 2(N-1) + 1.
  addresses exchange_per_pair(::gloo::rendezvous::Store& store, const addresses& mine) const {
    std::vector<std::string> my_keys, their_keys;
    std::vector<std::vector<char>> my_addresses;
    for (int peer = 0; peer < size; ++peer) {
      if (peer == rank) continue;
      my_keys.push_back(gloo_mesh_key(rank, peer));
      my_addresses.push_back(mine[static_cast<std::size_t>(peer)]);
      their_keys.push_back(gloo_mesh_key(peer, rank));
    }
    std::vector<std::vector<char>> theirs;
    if (auto* batches = dynamic_cast<gloo_batch_store*>(&store)) {
      batches->multi_set(my_keys, my_addresses);
      theirs = batches->multi_get(their_keys, getTimeout());
    } else {
      for (std::size_t i = 0; i < my_keys.size(); ++i)
        store.set(my_keys[i], my_addresses[i]);
      store.wait(their_keys, getTimeout()); // one round trip for all of them
      for (auto& key : their_keys)
        theirs.push_back(store.get(key));
    }
    addresses at(static_cast<std::size_t>(size));
    for (int peer = 0, i = 0; peer < size; ++peer)
      if (peer != rank) at[static_cast<std::size_t>(peer)] = std::move(theirs[static_cast<std::size_t>(i++)]);
    return at;
  }

  addresses exchange_per_rank(::gloo::rendezvous::Store& store, const addresses& mine) const {
    std::vector<char> list_of_mine;
    for (int peer = 0; peer < size; ++peer)
      if (peer != rank) {
        const auto& a = mine[static_cast<std::size_t>(peer)];
        list_of_mine.insert(list_of_mine.end(), a.begin(), a.end());
      }
    store.set(std::to_string(rank), list_of_mine);
    addresses at(static_cast<std::size_t>(size));
    for (int peer = 0; peer < size; ++peer) {
      if (peer == rank) continue;
      store.wait({std::to_string(peer)}, getTimeout());
      auto list = store.get(std::to_string(peer));
      const std::size_t entry = list.size() / static_cast<std::size_t>(size - 1);
      if (entry == 0 || entry * static_cast<std::size_t>(size - 1) != list.size())
        throw std::runtime_error(detail::message({"rank ", peer, "'s list of pair addresses has ",
                                                  list.size(), " bytes, not one entry per peer"}));
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

#endif // DDP_DETAIL_GLOO_MESH_HPP
