// ddp's mesh of Gloo TCP pairs (ddp/detail/backend/gloo_mesh.hpp) and the
// ticker that keeps its event loop going while pairs close
// (gloo_loop_ticker.hpp), in one process: ranks are threads, each with a real
// Gloo TCP device on loopback, meeting through Gloo's in-memory HashStore.
// Multi-process meshes run in every dist test; here the context's own life is
// checked: connecting, carrying data, failing, and giving back its device.
#include <ddp/detail/backend/gloo_device.hpp>
#include <ddp/detail/backend/gloo_mesh.hpp>

#include <doctest/doctest.h>

#include <gloo/rendezvous/hash_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/address.h>
#include <gloo/transport/unbound_buffer.h>

#include <arpa/inet.h>
#include <chrono>
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

/// A Gloo pair address at 127.0.0.2:9 for a rank that never connects: larger
/// than the ranks' own (127.0.0.1), so by Gloo's rule it would dial them, and
/// they wait for it.
std::vector<char> address_nobody_dials_from() {
  sockaddr_in at{};
  at.sin_family = AF_INET;
  at.sin_port = htons(9);
  at.sin_addr.s_addr = htonl(0x7f000002);
  sockaddr_storage ss{};
  std::memcpy(&ss, &at, sizeof at);
  return ::gloo::transport::tcp::Address(ss).bytes();
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

TEST_CASE("an interrupt stops ranks waiting for a peer that never dials, naming it and why") {
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
      gloo_mesh_context m(r, 3, 40s);
      try {
        m.connect(prefixed, loopback_device(r), gloo_mesh_keys::per_pair,
                  &stops[static_cast<std::size_t>(r)]);
      } catch (const std::runtime_error& e) { return std::string(e.what()); }
      return std::string("connected");
    }));
  std::this_thread::sleep_for(300ms); // both wait for rank 2 by now (or soon: the stop holds either way)
  const auto t0 = std::chrono::steady_clock::now();
  for (auto& s : stops)
    s.interrupt("rank 2 exited (this test)");
  for (auto& c : connecting) {
    const std::string what = c.get();
    INFO(what);
    CHECK(what.find("waiting for a connection from rank 2 (its pair at [127.0.0.2]:9, ") !=
          std::string::npos);
    CHECK(what.find("stopped: rank 2 exited (this test)") != std::string::npos);
  }
  CHECK(std::chrono::steady_clock::now() - t0 < 20s); // not the 40 s timeout

  // Interrupted before it starts: the connect stops at its first peer.
  ddp::detail::connect_interrupt early;
  early.interrupt("rank 2 failed before (this test)");
  gloo_mesh_context m(0, 3, 40s);
  ::gloo::rendezvous::PrefixStore other("early", store);
  other.set(ddp::detail::gloo_mesh_key(1, 0), absent);
  other.set(ddp::detail::gloo_mesh_key(2, 0), absent);
  CHECK_THROWS_WITH_AS(m.connect(other, loopback_device(0), gloo_mesh_keys::per_pair, &early),
                       doctest::Contains("stopped: rank 2 failed before (this test)"), std::runtime_error);
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
