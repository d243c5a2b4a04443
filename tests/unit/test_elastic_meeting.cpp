// The survivors' meeting of in-process recovery (ddp::elastic::run), over a real tcp_store in
// one process: each survivor a thread, a lost rank a connection closed without a goodbye.
// Who the decider waits for: a busy survivor the store knows alive (up to the timeout), nobody
// past last_call when the store saw no loss, and a survivor recorded lost that did arrive. With
// joiners: the joiners admitted to the generation, by identity, up to last_call counted from when
// every survivor is there (not one its agent marked lost), and every busy survivor still.
// The members' wait before the mesh: a dead joiner ends it at its lost mark, one verdict holds
// for every member, and the next meeting does not wait for a dead joiner member.
#include <ddp/detail/elastic/joiners.hpp>
#include <ddp/detail/elastic/meeting.hpp>
#include <ddp/detail/store/handshake.hpp>
#include <ddp/detail/store/socket.hpp>
#include <ddp/store.hpp>

#include "../support/local_store.hpp"

#include <doctest/doctest.h>

#include <cstdlib>
#include <future>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;

namespace {

ddp::topology job_on(int port) {
  ddp::topology t;
  t.master_addr = "127.0.0.1";
  t.store_port = port;
  t.world_size = 3;
  return t;
}

/// Rank `rank` of generation 0 drops without a goodbye (as a crash), and the store records it.
void lose(ddp::tcp_store& server, int rank) {
  {
    auto fd = ddp::detail::connect_tcp("127.0.0.1", server.port(), ddp::detail::clock::now() + 2s);
    REQUIRE(ddp::detail::client_handshake(fd.get(), "secret", rank, ddp::detail::clock::now() + 2s) ==
            ddp::detail::handshake_result::ok);
  }
  for (int look = 0; look < 200 && server.lost_ranks().size() < 1; ++look)
    std::this_thread::sleep_for(10ms);
}

/// Old rank `old_rank` arrives at the meeting for generation 1 after `delay`; its new rank.
std::future<int> arrive(const ddp::topology& job, int old_rank, std::chrono::milliseconds delay,
                        std::chrono::milliseconds last_call) {
  return std::async(std::launch::async, [=] {
    std::this_thread::sleep_for(delay);
    auto g = ddp::detail::meet_survivors(job, {old_rank, 0}, 3, 1, last_call, 5s, "secret");
    CHECK(g.rv.topo.world_size == static_cast<int>(g.members.size()));
    return g.rv.topo.rank;
  });
}

} // namespace

TEST_CASE("a survivor busy past the last call is waited for while the store knows it alive") {
  ddp::tcp_store server(ddp_test::local_server_options());
  const auto job = job_on(server.port());
  lose(server, 2);
  const auto t0 = std::chrono::steady_clock::now();
  auto decider = arrive(job, 1, 0ms, 300ms);
  auto busy = arrive(job, 0, 1500ms, 300ms); // as when saving a checkpoint
  CHECK(busy.get() == 0);
  CHECK(decider.get() == 1);
  CHECK(std::chrono::steady_clock::now() - t0 < 4s); // at its arrival, not at the timeout
}

TEST_CASE("with no loss in the store, the last call closes the meeting with who came") {
  ddp::tcp_store server(ddp_test::local_server_options());
  const auto job = job_on(server.port());
  const auto t0 = std::chrono::steady_clock::now();
  auto a = arrive(job, 0, 0ms, 300ms);
  auto b = arrive(job, 2, 50ms, 300ms);
  CHECK(a.get() == 0);
  CHECK(b.get() == 1);
  const auto took = std::chrono::steady_clock::now() - t0;
  CHECK(took >= 300ms);
  CHECK(took < 3s); // not the 5 s timeout
  try {             // old rank 1 comes after the close: it is told it was left out
    ddp::detail::meet_survivors(job, {1, 0}, 3, 1, 300ms, 5s, "secret");
    FAIL("a late survivor joined a closed meeting");
  } catch (const ddp::error& e) {
    CHECK(e.kind() == ddp::error_kind::timeout);
    CHECK(std::string(e.what()).find("arrived after the survivors' meeting") != std::string::npos);
  }
}

TEST_CASE("a survivor recorded lost (its store connection broke) still counts once it arrives") {
  ddp::tcp_store server(ddp_test::local_server_options());
  const auto job = job_on(server.port());
  lose(server, 1); // rank 1's connection broke: the store saw no goodbye
  lose(server, 2);
  for (int look = 0; look < 200 && server.lost_ranks().size() < 2; ++look)
    std::this_thread::sleep_for(10ms);
  REQUIRE(server.lost_ranks().size() == 2);
  auto decider = arrive(job, 1, 0ms, 300ms);
  auto other = arrive(job, 0, 500ms, 300ms); // after the last call, before the timeout
  CHECK(other.get() == 0);
  CHECK(decider.get() == 1);
}

namespace {

/// Rank 0 of generation 0 (of 2 ranks, no loss) admitted joiner `id`, in the slot of job rank 2,
/// to generation 1; `lost`: its agent then saw it die.
void admit_joiner(const ddp::topology& job, const std::string& id, bool lost = false) {
  REQUIRE(::setenv("DDP_ELASTIC_JOINERS", "1", 1) == 0); // the meeting looks for joiners
  ddp::tcp_store joins(ddp::detail::joiners_store_options(job, 5s, "secret"));
  ddp::detail::register_joiner(joins, {id, 2, 0});
  REQUIRE(ddp::detail::admit_waiting_joiners(joins, 1).size() == 1);
  if (lost) ddp::detail::mark_joiner_lost(joins, id);
}

std::future<ddp::detail::elastic_generation> survivor_of_2(const ddp::topology& job, int old_rank,
                                                           std::chrono::milliseconds delay,
                                                           std::chrono::milliseconds last_call) {
  return std::async(std::launch::async, [=] {
    std::this_thread::sleep_for(delay);
    return ddp::detail::meet_survivors(job, {old_rank, 0}, 2, 1, last_call, 5s, "secret");
  });
}

} // namespace

TEST_CASE("a meeting with joiners expects them by identity and never drops a busy survivor") {
  ddp::tcp_store server(ddp_test::local_server_options());
  const auto job = job_on(server.port());
  SUBCASE("a survivor busy past the last call is still a member, and so is the joiner") {
    admit_joiner(job, "rank2.1");
    const auto t0 = std::chrono::steady_clock::now();
    auto a = survivor_of_2(job, 0, 0ms, 300ms);
    auto busy = survivor_of_2(job, 1, 1500ms, 300ms); // its own work before the commit's meeting
    auto joiner = std::async(std::launch::async, [&] {
      auto me = job;
      me.rank = 2;
      return ddp::detail::meet_as_joiner(me, "rank2.1", 1, 300ms, 5s, "secret");
    });
    const auto ga = a.get(), gb = busy.get(), gj = joiner.get();
    CHECK(ga.rv.topo.world_size == 3);
    CHECK(gb.rv.topo.rank == 1);
    CHECK(gj.rv.topo.rank == 2);
    CHECK(gj.members[2].old_rank == ddp::detail::joiner_rank_base + 2); // by its slot, after every survivor
    CHECK(std::chrono::steady_clock::now() - t0 < 4s); // at the busy one's arrival, not the timeout
  }
  SUBCASE("a joiner that never comes: the last call counts from the last survivor's arrival") {
    admit_joiner(job, "rank2.2");
    const auto t0 = std::chrono::steady_clock::now();
    auto a = survivor_of_2(job, 0, 0ms, 500ms);
    auto late = survivor_of_2(job, 1, 1000ms, 500ms);
    CHECK(a.get().members.size() == 2);
    CHECK(late.get().rv.topo.world_size == 2);
    const auto took = std::chrono::steady_clock::now() - t0;
    CHECK(took >= 1500ms); // 1 s for the survivors, then the joiner's last call
    CHECK(took < 4s);      // not the 5 s timeout
  }
  SUBCASE("a joiner its agent marked lost is not waited for") {
    admit_joiner(job, "rank2.3", true);
    const auto t0 = std::chrono::steady_clock::now();
    auto a = survivor_of_2(job, 0, 0ms, 3s);
    auto b = survivor_of_2(job, 1, 0ms, 3s);
    CHECK(a.get().members.size() == 2);
    CHECK(b.get().members.size() == 2);
    CHECK(std::chrono::steady_clock::now() - t0 < 2s); // not the 3 s last call
  }
}

TEST_CASE("an admission meeting whose joiner died before arriving still waits for a busy survivor") {
  ddp::tcp_store server(ddp_test::local_server_options());
  const auto job = job_on(server.port());
  admit_joiner(job, "rank2.9", true); // admitted, then its agent saw it die
  auto a = survivor_of_2(job, 0, 0ms, 300ms);
  auto busy = survivor_of_2(job, 1, 1500ms, 300ms); // past the last call
  CHECK(a.get().members.size() == 2);
  CHECK(busy.get().members.size() == 2);
}

TEST_CASE("a joiner that arrived, then died, is no member; one that never connects is a loss") {
  ddp::tcp_store server(ddp_test::local_server_options());
  const auto job = job_on(server.port());
  // meet_as_joiner's first write, as its process makes it: "old rank, node" under the meeting's scope.
  const auto arrive_as_joiner = [&](const std::string& id) {
    ddp::tcp_store_options o;
    o.host = "127.0.0.1";
    o.port = job.store_port;
    o.serve = false;
    o.timeout = 5s;
    o.token = "secret";
    o.scope = ddp::detail::elastic_scope(job, 0) + "meet/";
    o.served_by_launcher = true;
    ddp::tcp_store meet(o);
    meet.set("g1/joined/" + id, std::to_string(ddp::detail::joiner_rank_base + 2) + " 0\n");
  };
  SUBCASE("marked lost after it arrived, before the survivors came") {
    admit_joiner(job, "rank2.8");
    arrive_as_joiner("rank2.8"); // then its process dies, and its agent marks it lost
    auto a = survivor_of_2(job, 0, 0ms, 300ms);
    std::this_thread::sleep_for(200ms);
    {
      ddp::tcp_store joins(ddp::detail::joiners_store_options(job, 5s, "secret"));
      ddp::detail::mark_joiner_lost(joins, "rank2.8");
    }
    auto b = survivor_of_2(job, 1, 0ms, 300ms);
    auto ga = a.get();
    auto gb = b.get();
    REQUIRE(ga.members.size() == 2);
    REQUIRE(gb.members.size() == 2);
    auto wa = std::async(std::launch::async, [&] { ddp::detail::wait_for_members(ga); });
    CHECK_NOTHROW(ddp::detail::wait_for_members(gb));
    CHECK_NOTHROW(wa.get());
  }
  SUBCASE("published, then never connected: peer_lost, and the next meeting does not wait for it") {
    admit_joiner(job, "rank2.7");
    arrive_as_joiner("rank2.7"); // then dies before it connects to generation 1's store
    auto a = survivor_of_2(job, 0, 0ms, 300ms);
    auto b = survivor_of_2(job, 1, 0ms, 300ms);
    auto ga = a.get();
    auto gb = b.get();
    REQUIRE(ga.members.size() == 3);
    ga.rv.timeout = gb.rv.timeout = 1s; // DDP_TIMEOUT, short here
    auto wa = std::async(std::launch::async, [&] { ddp::detail::wait_for_members(ga); });
    try {
      ddp::detail::wait_for_members(gb);
      FAIL("a member that never connected was waited for without end");
    } catch (const ddp::error& e) { CHECK(e.kind() == ddp::error_kind::peer_lost); }
    CHECK_THROWS_AS(wa.get(), ddp::error);
    // Generation 2 of the two survivors: the joiner (rank 2 of generation 1) is not waited for.
    const auto t0 = std::chrono::steady_clock::now();
    auto c = std::async(std::launch::async, [&] {
      return ddp::detail::meet_survivors(job, {0, 0}, 3, 2, 3s, 5s, "secret");
    });
    auto d = ddp::detail::meet_survivors(job, {1, 0}, 3, 2, 3s, 5s, "secret");
    CHECK(c.get().members.size() == 2);
    CHECK(d.members.size() == 2);
    CHECK(std::chrono::steady_clock::now() - t0 < 2500ms); // not the 3 s last call nor the 5 s timeout
  }
  SUBCASE("published, then its agent saw it die: the wait ends at the lost mark, not the timeout") {
    admit_joiner(job, "rank2.6");
    arrive_as_joiner("rank2.6"); // then dies before it connects to generation 1's store
    auto a = survivor_of_2(job, 0, 0ms, 300ms);
    auto b = survivor_of_2(job, 1, 0ms, 300ms);
    auto ga = a.get();
    auto gb = b.get();
    REQUIRE(ga.members.size() == 3);
    CHECK(ga.joiner_ids[2] == "rank2.6");
    CHECK(gb.joiner_ids[2] == "rank2.6"); // read from the meeting, not decided here
    ga.rv.timeout = gb.rv.timeout = 20s;  // DDP_TIMEOUT: the wait must not come near it
    const auto t0 = std::chrono::steady_clock::now();
    auto wa = std::async(std::launch::async, [&] { ddp::detail::wait_for_members(ga); });
    auto wb = std::async(std::launch::async, [&] { ddp::detail::wait_for_members(gb); });
    std::this_thread::sleep_for(300ms);
    {
      ddp::tcp_store joins(ddp::detail::joiners_store_options(job, 5s, "secret"));
      ddp::detail::mark_joiner_lost(joins, "rank2.6");
    }
    for (auto* w : {&wa, &wb})
      try {
        w->get();
        FAIL("a dead joiner's generation formed");
      } catch (const ddp::error& e) {
        CHECK(e.kind() == ddp::error_kind::peer_lost);
        CHECK(std::string(e.what()).find("member(s) 2 taken for absent") != std::string::npos);
      }
    CHECK(std::chrono::steady_clock::now() - t0 < 10s); // before: the 20 s timeout
    // The next meeting does not wait for it either (its 20 s timeout: the bound has a wide margin).
    const auto t1 = std::chrono::steady_clock::now();
    auto c = std::async(std::launch::async, [&] {
      return ddp::detail::meet_survivors(job, {0, 0}, 3, 2, 20s, 20s, "secret");
    });
    auto d = ddp::detail::meet_survivors(job, {1, 0}, 3, 2, 20s, 20s, "secret");
    CHECK(c.get().members.size() == 2);
    CHECK(d.members.size() == 2);
    CHECK(std::chrono::steady_clock::now() - t1 < 10s);
  }
  SUBCASE("a joiner arriving between two members' deadlines: one verdict, every member follows it") {
    admit_joiner(job, "rank2.5");
    arrive_as_joiner("rank2.5");
    auto joiner = std::async(std::launch::async, [&] {
      auto me = job;
      me.rank = 2;
      return ddp::detail::meet_as_joiner(me, "rank2.5", 1, 300ms, 5s, "secret");
    });
    auto a = survivor_of_2(job, 0, 0ms, 300ms);
    auto b = survivor_of_2(job, 1, 0ms, 300ms);
    auto ga = a.get();
    auto gb = b.get();
    auto gj = joiner.get();
    REQUIRE(ga.members.size() == 3);
    ga.rv.timeout = 1s;  // the first deadline
    gb.rv.timeout = 20s; // the second, long after the joiner's arrival
    auto wa = std::async(std::launch::async, [&] { ddp::detail::wait_for_members(ga); });
    auto wb = std::async(std::launch::async, [&] { ddp::detail::wait_for_members(gb); });
    const auto kind_of = [](auto&& wait) {
      try {
        wait();
      } catch (const ddp::error& e) { return e.kind(); }
      FAIL("a member went on into a mesh the others had left");
      return ddp::error_kind::config;
    };
    CHECK(kind_of([&] { wa.get(); }) == ddp::error_kind::peer_lost); // its deadline: absent, for everyone
    // The joiner arrives after that verdict, long before the second deadline: before, rank 1 then
    // went on into a mesh rank 0 had left.
    CHECK(kind_of([&] { ddp::detail::wait_for_members(gj); }) == ddp::error_kind::peer_lost);
    CHECK(kind_of([&] { wb.get(); }) == ddp::error_kind::peer_lost);
  }
  SUBCASE("an absent joiner that never comes: the late-deadline member follows the verdict at once") {
    admit_joiner(job, "rank2.3");
    arrive_as_joiner("rank2.3"); // then never connects to generation 1's store
    auto a = survivor_of_2(job, 0, 0ms, 300ms);
    auto b = survivor_of_2(job, 1, 0ms, 300ms);
    auto ga = a.get();
    auto gb = b.get();
    REQUIRE(ga.members.size() == 3);
    ga.rv.timeout = 1s;  // the first deadline
    gb.rv.timeout = 20s; // the second: rank 1 must not wait for it
    const auto t0 = std::chrono::steady_clock::now();
    auto wa = std::async(std::launch::async, [&] { ddp::detail::wait_for_members(ga); });
    auto wb = std::async(std::launch::async, [&] { ddp::detail::wait_for_members(gb); });
    CHECK_THROWS_AS(wa.get(), ddp::error);
    try {
      wb.get();
      FAIL("the late-deadline member formed a generation without the absent joiner");
    } catch (const ddp::error& e) {
      CHECK(e.kind() == ddp::error_kind::peer_lost);
      CHECK(e.rank() == 2);
      CHECK(std::string(e.what()).find("member(s) 2 taken for absent") != std::string::npos);
    }
    CHECK(std::chrono::steady_clock::now() - t0 < 8s); // about 1 s; before: the 20 s deadline
  }
  SUBCASE("a joiner that dies while a survivor is lost: the next meeting does not wait for it") {
    admit_joiner(job, "rank2.4");
    arrive_as_joiner("rank2.4"); // then dies before it connects to generation 1's store
    auto a = survivor_of_2(job, 0, 0ms, 300ms);
    auto b = survivor_of_2(job, 1, 0ms, 300ms);
    auto ga = a.get();
    auto gb = b.get();
    REQUIRE(ga.members.size() == 3);
    ga.rv.timeout = 20s;
    REQUIRE(gb.rv.store->report_failure("lost in this test"));      // rank 1 of generation 1 is lost
    CHECK_THROWS_AS(ddp::detail::wait_for_members(ga), ddp::error); // at once: a member lost
    {
      ddp::tcp_store joins(ddp::detail::joiners_store_options(job, 5s, "secret"));
      ddp::detail::mark_joiner_lost(joins, "rank2.4"); // its agent's mark comes after that
    }
    // Generation 2: old rank 0 alone; 1 is lost in generation 1's store, 2 is a dead joiner.
    const auto t0 = std::chrono::steady_clock::now();
    auto g2 = ddp::detail::meet_survivors(job, {0, 0}, 3, 2, 20s, 20s, "secret");
    CHECK(g2.members.size() == 1);
    CHECK(std::chrono::steady_clock::now() - t0 < 10s); // before: the 20 s timeout
  }
}

TEST_CASE("a member lost after arriving is named by every member, whichever wrote the verdict") {
  ddp::tcp_store server(ddp_test::local_server_options());
  auto job = job_on(server.port());
  std::vector<std::future<ddp::detail::elastic_generation>> f;
  for (int r = 0; r < 3; ++r)
    f.push_back(std::async(std::launch::async, [&, r] {
      return ddp::detail::meet_survivors(job, {r, 0}, 3, 1, 5s, 10s, "secret"); // all three come
    }));
  auto g0 = f[0].get(), g1 = f[1].get(), g2 = f[2].get();
  REQUIRE(g0.members.size() == 3);
  g2.rv.store->set("ddp/arrived/2", "1"); // rank 2 arrives, then fails
  REQUIRE(g2.rv.store->report_failure("failed in this test"));
  for (auto* g : {&g0, &g1}) // the first sees the loss and writes the verdict; the second reads it
    try {
      ddp::detail::wait_for_members(*g);
      FAIL("a generation formed without its lost member");
    } catch (const ddp::error& e) {
      CHECK(e.kind() == ddp::error_kind::peer_lost);
      CHECK(e.rank() == 2);
      CHECK(std::string(e.what()).find("taken for absent") == std::string::npos); // not the cause
    }
}
