// ddp's mesh of Gloo TCP pairs (ddp/detail/gloo/mesh.hpp) and the
// ticker that keeps its event loop going while pairs close
// (detail/gloo/loop_ticker.hpp), in one process: ranks are threads, each with a real
// Gloo TCP device on loopback, meeting through Gloo's in-memory HashStore.
// Multi-process meshes run in every dist test; here the context's own life is
// checked: connecting, carrying data, failing, and giving back its device.
#include <ddp/detail/gloo/device.hpp>
#include <ddp/detail/gloo/mesh.hpp>

#include <doctest/doctest.h>

#include <gloo/rendezvous/hash_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/address.h>
#include <gloo/transport/unbound_buffer.h>

#include <algorithm>
#include <arpa/inet.h>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <future>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using ddp::detail::gloo_mesh_context;
using ddp::detail::gloo_mesh_keys;

namespace {

using device_ptr = std::shared_ptr<::gloo::transport::Device>;
using mesh = std::unique_ptr<gloo_mesh_context>;

device_ptr loopback_device(int rank) { return ddp::detail::make_gloo_device({rank, rank, "", 0}); }

/// Connects `devices.size()` ranks, one thread each, through `store` under `prefix`.
std::vector<mesh> connect_all(::gloo::rendezvous::Store& store, const std::string& prefix,
                              const std::vector<device_ptr>& devices, gloo_mesh_keys keys,
                              std::chrono::milliseconds timeout = 30s) {
  const int n = static_cast<int>(devices.size());
  std::vector<mesh> meshes(devices.size());
  std::vector<std::future<void>> done;
  for (int r = 0; r < n; ++r)
    done.push_back(std::async(std::launch::async, [&, r] {
      ::gloo::rendezvous::PrefixStore prefixed(prefix, store);
      auto m = std::make_unique<gloo_mesh_context>(r, n, timeout);
      m->connect(prefixed, devices[static_cast<std::size_t>(r)], keys);
      meshes[static_cast<std::size_t>(r)] = std::move(m);
    }));
  for (auto& d : done)
    d.get(); // rethrows a rank's failure
  return meshes;
}

/// A Gloo pair address (as published) at the IPv4 address `host`, `port`.
std::vector<char> gloo_address(std::uint32_t host, std::uint16_t port) {
  sockaddr_in at{};
  at.sin_family = AF_INET;
  at.sin_port = htons(port);
  at.sin_addr.s_addr = htonl(host);
  sockaddr_storage ss{};
  std::memcpy(&ss, &at, sizeof at);
  return ::gloo::transport::tcp::Address(ss).bytes();
}

/// A Gloo pair address at 127.0.0.2:9 for a rank that never connects: larger
/// than the ranks' own (127.0.0.1), so by Gloo's rule it would dial them, and
/// they wait for it.
std::vector<char> address_nobody_dials_from() { return gloo_address(0x7f000002, 9); }

/// What `f` throws as std::runtime_error ("" when it returns).
template <class F> std::string error_of(F f) {
  try {
    f();
  } catch (const std::runtime_error& e) { return e.what(); }
  return "";
}

/// Connects rank `r` of `n` through `store`, told of lost ranks by `stop`:
/// what it threw, or "connected".
std::string connect_or_error(::gloo::rendezvous::Store& store, int r, int n,
                             std::chrono::milliseconds timeout, ddp::detail::connect_interrupt& stop) {
  gloo_mesh_context m(r, n, timeout);
  const std::string what =
      error_of([&] { m.connect(store, loopback_device(r), gloo_mesh_keys::per_pair, &stop); });
  return what.empty() ? "connected" : what;
}

/// Every rank sends 100 + its rank to the next and checks what the previous sent.
void pass_ring(std::vector<mesh>& meshes) {
  const int n = static_cast<int>(meshes.size());
  std::vector<std::future<void>> done;
  for (int r = 0; r < n; ++r)
    done.push_back(std::async(std::launch::async, [&, r] {
      auto& m = *meshes[static_cast<std::size_t>(r)];
      int out = 100 + r, in = -1;
      auto send = m.createUnboundBuffer(&out, sizeof out);
      auto recv = m.createUnboundBuffer(&in, sizeof in);
      send->send((r + 1) % n, 7);
      recv->recv((r + n - 1) % n, 7);
      CHECK(send->waitSend(10s));
      CHECK(recv->waitRecv(10s));
      CHECK(in == 100 + (r + n - 1) % n);
    }));
  for (auto& d : done)
    d.get();
}

} // namespace

TEST_CASE("three ranks connect through per-pair keys and per-rank lists, and carry data") {
  for (auto keys : {gloo_mesh_keys::per_pair, gloo_mesh_keys::per_rank}) {
    ::gloo::rendezvous::HashStore store;
    std::vector<device_ptr> devices{loopback_device(0), loopback_device(1), loopback_device(2)};
    auto meshes = connect_all(store, "mesh", devices, keys);
    pass_ring(meshes);
  }
}

TEST_CASE("a context holds its device last, and lets it go when it goes (no reference left behind)") {
  ::gloo::rendezvous::HashStore store;
  std::vector<std::weak_ptr<::gloo::transport::Device>> gone;
  {
    std::vector<device_ptr> devices{loopback_device(0), loopback_device(1)};
    auto meshes = connect_all(store, "mesh", devices, gloo_mesh_keys::per_pair);
    pass_ring(meshes);
    for (auto& d : devices)
      gone.push_back(d);
    devices.clear(); // the contexts hold the devices last
    for (auto& w : gone)
      CHECK_FALSE(w.expired());
    meshes.clear();
  }
  for (auto& w : gone)
    CHECK(w.expired());
}

TEST_CASE("a device still held elsewhere keeps its loop: a later mesh on it connects and carries data") {
  ::gloo::rendezvous::HashStore store;
  std::vector<device_ptr> devices{loopback_device(0), loopback_device(1), loopback_device(2)};
  for (int round = 0; round < 3; ++round) {
    auto meshes = connect_all(store, "round" + std::to_string(round), devices, gloo_mesh_keys::per_pair);
    pass_ring(meshes);
  } // each round's contexts close their pairs and unregister from the devices' loops
}

TEST_CASE("fail_connections wakes a peer waiting on this rank, and fails this rank's later sends") {
  ::gloo::rendezvous::HashStore store;
  std::vector<device_ptr> devices{loopback_device(0), loopback_device(1)};
  auto meshes = connect_all(store, "mesh", devices, gloo_mesh_keys::per_pair, 40s);
  int in = 0;
  auto waiting = std::async(std::launch::async, [&] {
    auto recv = meshes[1]->createUnboundBuffer(&in, sizeof in);
    const auto t0 = std::chrono::steady_clock::now();
    bool threw = false;
    try {
      recv->recv(0, 3); // throws already where the failure came first
      recv->waitRecv(); // the context's timeout: 40 s
    } catch (const std::exception&) { threw = true; }
    return std::pair{threw, std::chrono::steady_clock::now() - t0};
  });
  std::this_thread::sleep_for(100ms); // rank 1 is waiting (or about to: the failure reaches it either way)
  meshes[0]->fail_connections();
  auto [threw, waited] = waiting.get();
  CHECK(threw);
  CHECK(waited < 20s); // woken by the closed connection, not by its timeout
  int out = 1;
  auto send = meshes[0]->createUnboundBuffer(&out, sizeof out);
  CHECK_THROWS([&] {
    send->send(1, 4);
    send->waitSend(1s);
  }());
}

TEST_CASE("a rank whose peers never publish fails within its timeout and leaves nothing behind") {
  ::gloo::rendezvous::HashStore store;
  ::gloo::rendezvous::PrefixStore prefixed("alone", store);
  auto device = loopback_device(0);
  std::weak_ptr<::gloo::transport::Device> held = device;
  {
    gloo_mesh_context m(0, 3, 300ms);
    const auto t0 = std::chrono::steady_clock::now();
    CHECK_THROWS(m.connect(prefixed, device));
    CHECK(std::chrono::steady_clock::now() - t0 < 20s);
  }
  device.reset();
  CHECK(held.expired()); // the failed connect closed its pairs and let the device go
}

TEST_CASE("news of a lost rank ends the waits for it once the living ranks have connected") {
  // Rank 2 of 3 published addresses (127.0.0.2, larger than the others'
  // 127.0.0.1: Gloo's rule has it dial them) but never connects, as a rank
  // that failed right after publishing.
  ::gloo::rendezvous::HashStore store;
  ::gloo::rendezvous::PrefixStore prefixed("mesh", store);
  const auto absent = address_nobody_dials_from();
  prefixed.set(ddp::detail::gloo_mesh_key(2, 0), absent);
  prefixed.set(ddp::detail::gloo_mesh_key(2, 1), absent);

  std::vector<ddp::detail::connect_interrupt> stops(2);
  std::vector<std::future<std::string>> connecting;
  for (int r = 0; r < 2; ++r)
    connecting.push_back(std::async(std::launch::async, [&, r] {
      return connect_or_error(prefixed, r, 3, 40s, stops[static_cast<std::size_t>(r)]);
    }));
  std::this_thread::sleep_for(300ms); // both wait for rank 2 by now (or soon: the stop holds either way)
  const auto t0 = std::chrono::steady_clock::now();
  for (auto& s : stops)
    s.interrupt(2, "rank 2 exited (this test)");
  for (auto& c : connecting) {
    const std::string what = c.get();
    INFO(what);
    CHECK(what.find("waiting for a connection from rank 2 (its pair at [127.0.0.2]:9, ") !=
          std::string::npos);
    CHECK(what.find("stopped: rank 2 exited (this test)") != std::string::npos);
    CHECK(what.find("no connection formed") == std::string::npos); // nobody living was missing
  }
  // Only rank 2's pair closed; ranks 0 and 1 were connected: no grace to wait.
  CHECK(std::chrono::steady_clock::now() - t0 < gloo_mesh_context::living_peers_grace);
}

TEST_CASE("a living peer that does not connect within the grace after the news fails the rest") {
  // Ranks 1 and 2 both published an address and never dial; the news names
  // rank 2 only (heard before the connect starts): rank 1 gets the grace.
  ::gloo::rendezvous::HashStore store;
  ::gloo::rendezvous::PrefixStore prefixed("grace", store);
  const auto absent = address_nobody_dials_from();
  prefixed.set(ddp::detail::gloo_mesh_key(1, 0), absent);
  prefixed.set(ddp::detail::gloo_mesh_key(2, 0), absent);
  ddp::detail::connect_interrupt early;
  early.interrupt(2, "rank 2 failed before (this test)");
  gloo_mesh_context m(0, 3, 40s);
  const auto t0 = std::chrono::steady_clock::now();
  const std::string what =
      error_of([&] { m.connect(prefixed, loopback_device(0), gloo_mesh_keys::per_pair, &early); });
  INFO(what);
  CHECK(what.find("waiting for a connection from rank 1 (its pair at [127.0.0.2]:9, this rank's at "
                  "[127.0.0.1]:") != std::string::npos);
  CHECK(what.find("stopped: rank 2 failed before (this test), and no connection formed in the 2000 ms "
                  "after") != std::string::npos);
  const auto waited = std::chrono::steady_clock::now() - t0;
  CHECK(waited >= gloo_mesh_context::living_peers_grace);
  CHECK(waited < 20s); // not the 40 s timeout
}

TEST_CASE("this rank's own failure after the news is kept in the error; before any news it waits a look") {
  // Rank 1's pair "listens" at 127.0.0.1:1, where nothing does: below rank
  // 0's own address, so rank 0 dials it, and is refused at once. Rank 2 never
  // dials (127.0.0.2:9).
  const auto refused = gloo_address(0x7f000001, 1);
  ::gloo::rendezvous::HashStore store;
  ::gloo::rendezvous::PrefixStore prefixed("own", store);
  prefixed.set(ddp::detail::gloo_mesh_key(1, 0), refused);
  prefixed.set(ddp::detail::gloo_mesh_key(2, 0), address_nobody_dials_from());

  SUBCASE("the news came first: the error names the lost rank, then this rank's own failure") {
    ddp::detail::connect_interrupt early;
    early.interrupt(2, "rank 2 failed (this test)");
    gloo_mesh_context m(0, 3, 40s);
    const std::string what =
        error_of([&] { m.connect(prefixed, loopback_device(0), gloo_mesh_keys::per_pair, &early); });
    INFO(what);
    CHECK(what.starts_with("waiting for a connection from rank 2 (its pair at [127.0.0.2]:9, "));
    CHECK(
        what.find("): stopped: rank 2 failed (this test); before it stopped: connecting to rank 1 (its pair "
                  "at [127.0.0.1]:1, ") != std::string::npos);
    CHECK(what.find("Connection refused") != std::string::npos);
  }
  SUBCASE("no news: this rank's own failure, after a look for news") {
    ddp::detail::connect_interrupt never;
    gloo_mesh_context m(0, 3, 40s);
    const auto t0 = std::chrono::steady_clock::now();
    const std::string what =
        error_of([&] { m.connect(prefixed, loopback_device(0), gloo_mesh_keys::per_pair, &never); });
    const auto waited = std::chrono::steady_clock::now() - t0;
    INFO(what);
    CHECK(what.starts_with("connecting to rank 1 (its pair at [127.0.0.1]:1, "));
    CHECK(what.find("Connection refused") != std::string::npos);
    CHECK(what.find("stopped") == std::string::npos);
    CHECK(waited >= gloo_mesh_context::news_look); // a peer's news may be on its way
    CHECK(waited < 20s);
  }
}

TEST_CASE("news naming no rank of this mesh ends its waits once none has ended for the grace") {
  // As in the nodes' leaders' mesh, told of a rank that leads no node.
  ::gloo::rendezvous::HashStore store;
  ::gloo::rendezvous::PrefixStore prefixed("nobody", store);
  prefixed.set(ddp::detail::gloo_mesh_key(1, 0), address_nobody_dials_from());
  ddp::detail::connect_interrupt stop;
  auto connecting = std::async(std::launch::async, [&] {
    gloo_mesh_context m(0, 2, 40s);
    m.connect(prefixed, loopback_device(0), gloo_mesh_keys::per_pair, &stop,
              {0, 4}); // ranks 0 and 4 of the job
  });
  std::this_thread::sleep_for(200ms);
  const auto t0 = std::chrono::steady_clock::now();
  stop.interrupt(5, "the store reports rank 5 lost (this test)"); // rank 5: no rank of this mesh
  const std::string what = error_of([&] { connecting.get(); });
  const auto waited = std::chrono::steady_clock::now() - t0;
  INFO(what);
  CHECK(what.find("waiting for a connection from rank 1 (its pair at [127.0.0.2]:9, this rank's at "
                  "[127.0.0.1]:") != std::string::npos);
  CHECK(what.find("): stopped: the store reports rank 5 lost (this test), and no connection formed in the "
                  "2000 ms after") != std::string::npos);
  CHECK(waited >= gloo_mesh_context::living_peers_grace);
  CHECK(waited < 20s); // not the 40 s timeout
}

TEST_CASE("a subgroup's mesh maps the news of a lost job rank to its own rank") {
  // Mesh ranks 0 and 1 are the job's ranks 4 and 9 (store_ranks); rank 1
  // published an address and never dials.
  ::gloo::rendezvous::HashStore store;
  ::gloo::rendezvous::PrefixStore prefixed("mapped", store);
  prefixed.set(ddp::detail::gloo_mesh_key(1, 0), address_nobody_dials_from());
  SUBCASE("job rank 9 lost: the wait for mesh rank 1 ends at once, no grace") {
    ddp::detail::connect_interrupt early;
    early.interrupt(9, "the store reports rank 9 lost (this test)");
    gloo_mesh_context m(0, 2, 40s);
    const auto t0 = std::chrono::steady_clock::now();
    const std::string what = error_of([&] {
      m.connect(prefixed, loopback_device(0), gloo_mesh_keys::per_pair, &early, {4, 9});
    });
    INFO(what);
    CHECK(what.find("the store reports rank 9 lost (this test)") != std::string::npos);
    CHECK(std::chrono::steady_clock::now() - t0 < gloo_mesh_context::living_peers_grace);
  }
  SUBCASE("job rank 1 lost: no rank of this mesh, though mesh rank 1 is numbered so; the grace runs") {
    ddp::detail::connect_interrupt early;
    early.interrupt(1, "the store reports rank 1 lost (this test)");
    gloo_mesh_context m(0, 2, 40s);
    const auto t0 = std::chrono::steady_clock::now();
    const std::string what = error_of([&] {
      m.connect(prefixed, loopback_device(0), gloo_mesh_keys::per_pair, &early, {4, 9});
    });
    INFO(what);
    CHECK(what.find("no connection formed in the 2000 ms after") != std::string::npos);
    CHECK(std::chrono::steady_clock::now() - t0 >= gloo_mesh_context::living_peers_grace);
  }
}

TEST_CASE("news of a lost rank at any moment of a connect ends it cleanly on every living rank") {
  // Rank 3 of 4 is the lost one: its pairs (plain Gloo ones) listen, so the
  // ranks that dial it connect, but it dials nobody, so the ranks it would
  // dial wait for it. The news lands anywhere from before the exchange to
  // after a rank's last connection (0-20 ms; a round connects in a few).
  // Failing every pair at the news (the first version) closed listeners that
  // living ranks were dialing, and a reset caught a peer's Gloo loop between
  // two system calls of its connect, which ended the process (3 runs in 25
  // beside a CPU hog); closing the pairs that dial rank 3 did the same to
  // rank 3's loop (14 runs in 20). Here only a wait for rank 3's dial ends,
  // and no living rank waits out the grace.
  std::mt19937 random(20261202);
  std::uniform_int_distribution<int> when_us(0, 20000);
  int stopped = 0, connected = 0;
  std::chrono::steady_clock::duration slowest{};
  for (int round = 0; round < 50; ++round) {
    ::gloo::rendezvous::HashStore store;
    ::gloo::rendezvous::PrefixStore prefixed("round" + std::to_string(round), store);
    auto lost_device = loopback_device(3);
    auto lost = lost_device->createContext(3, 4);
    lost->setTimeout(20s); // unset, Gloo's context timeout is garbage (EDOM from SO_RCVTIMEO under ASan)
    for (int p = 0; p < 3; ++p) {
      lost->createPair(p);
      prefixed.set(ddp::detail::gloo_mesh_key(3, p), lost->getPair(p)->address().bytes());
    }
    std::vector<ddp::detail::connect_interrupt> stops(3);
    std::vector<std::future<std::string>> ranks;
    for (int r = 0; r < 3; ++r)
      ranks.push_back(std::async(std::launch::async, [&, r] {
        return connect_or_error(prefixed, r, 4, 20s, stops[static_cast<std::size_t>(r)]);
      }));
    std::this_thread::sleep_for(std::chrono::microseconds(when_us(random)));
    for (auto& s : stops)
      s.interrupt(3, "rank 3 failed (this test)");
    const auto news_at = std::chrono::steady_clock::now();
    for (auto& r : ranks) {
      const std::string what = r.get();
      INFO(what);
      if (what == "connected") {
        ++connected; // it dials rank 3, and had connected before the news
      } else {
        ++stopped;
        CHECK(what.find(" rank 3 (its pair at [127.0.0.1]:") != std::string::npos);
        CHECK(what.find("): stopped: rank 3 failed (this test)") != std::string::npos);
        CHECK(what.find("did not connect within") ==
              std::string::npos); // no living rank waited out the grace
      }
    }
    slowest = std::max(slowest, std::chrono::steady_clock::now() - news_at);
  }
  MESSAGE(stopped << " connects stopped, " << connected << " connected before the news; the last rank "
                  << std::chrono::duration<double, std::milli>(slowest).count()
                  << " ms after the news at most");
  CHECK(stopped > 0);
}

TEST_CASE("a wait for a peer that never dials runs its timeout and says it timed out") {
  // Rank 1 published an address (127.0.0.2: it would dial) and never connects.
  ::gloo::rendezvous::HashStore store;
  ::gloo::rendezvous::PrefixStore prefixed("silent", store);
  prefixed.set(ddp::detail::gloo_mesh_key(1, 0), address_nobody_dials_from());
  gloo_mesh_context m(0, 2, 1s);
  const auto t0 = std::chrono::steady_clock::now();
  // A timeout, not a failure of this rank's own: process_group does not report it as one.
  CHECK_THROWS_WITH_AS(m.connect(prefixed, loopback_device(0)),
                       doctest::Contains("waiting for a connection from rank 1 (its pair at [127.0.0.2]:9, "),
                       ddp::detail::gloo_mesh_timeout);
  const auto waited = std::chrono::steady_clock::now() - t0;
  CHECK(waited >= 900ms);
  CHECK(waited < 20s);
}
