// How the store serves a failing job, in one process: a rank's own failure
// answers every pending wait with "lost, rank r" (waits on diagnostics
// excepted), rank 0's server keeps serving on teardown until the other ranks
// have left or were found stopped (bounded), the flight recorder keeps the last 64 collectives, and
// the peer-failure watch hears of a failed rank at once.
#include <ddp/detail/fault/desync.hpp>
#include <ddp/detail/fault/flight_recorder.hpp>
#include <ddp/detail/process_group/peer_failure_watch.hpp>
#include <ddp/detail/store/handshake.hpp>
#include <ddp/detail/store/server.hpp>
#include <ddp/store.hpp>

#include <doctest/doctest.h>

#include <condition_variable>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

using namespace std::chrono_literals;

namespace {
ddp::tcp_store_options opts(int port, int rank, std::chrono::milliseconds timeout = 5s) {
  ddp::tcp_store_options o;
  o.host = "127.0.0.1";
  o.port = port;
  o.serve = port == 0;
  o.timeout = timeout;
  o.token = "secret";
  o.rank = rank;
  return o;
}
} // namespace

TEST_CASE("a rank's failure answers pending and later waits with peer_lost naming it") {
  ddp::tcp_store server(opts(0, 0));
  ddp::tcp_store waiter(opts(server.port(), 1));
  ddp::tcp_store victim(opts(server.port(), 2));
  auto t0 = std::chrono::steady_clock::now();
  auto pending = std::async(std::launch::async, [&] {
    try {
      waiter.wait({"never/set"}, 4s);
      return -2;
    } catch (const ddp::error& e) {
      CHECK(e.kind() == ddp::error_kind::peer_lost);
      CHECK(std::string(e.what()).find("'never/set'") != std::string::npos);
      CHECK(std::string(e.what()).find("failed: out of memory") != std::string::npos);
      return e.rank();
    }
  });
  std::this_thread::sleep_for(200ms);
  REQUIRE(victim.report_failure("out of memory"));
  CHECK(pending.get() == 2);
  CHECK(std::chrono::steady_clock::now() - t0 < 2s); // not the 4 s wait
  // A wait that starts afterwards is answered at once too.
  CHECK_THROWS_AS(waiter.wait({"also/never"}, 4s), ddp::error);
  // Diagnostics are not cut short: they wait (and here time out) as asked.
  CHECK_FALSE(waiter.try_wait({"ddp/fault/progress/9"}, 300ms));
  auto lost = waiter.wait_for_lost_rank(0ms);
  CHECK(lost.rank == 2);
  CHECK(lost.reason == "failed: out of memory");
  CHECK_FALSE(lost.silent);
}

TEST_CASE("a wait that times out names only the keys still missing") {
  ddp::tcp_store server(opts(0, 0));
  server.set("ddp/arrived/0", "1");
  try {
    server.wait({"ddp/arrived/0", "ddp/arrived/1"}, 200ms);
    FAIL("expected a timeout");
  } catch (const ddp::error& e) {
    CHECK(e.kind() == ddp::error_kind::timeout);
    CHECK(std::string(e.what()).find("'ddp/arrived/1'") != std::string::npos);
    CHECK(std::string(e.what()).find("'ddp/arrived/0'") == std::string::npos);
  }
}

TEST_CASE("no lost rank is 'unknown', not rank 0") {
  ddp::tcp_store server(opts(0, 0));
  ddp::tcp_store client(opts(server.port(), 1));
  auto lost = client.wait_for_lost_rank(100ms);
  CHECK(lost.rank == -1);
  CHECK_FALSE(lost);
}

TEST_CASE("rank 0's store keeps serving on teardown until the others have left") {
  // A survivor stuck in a Gloo send asks only after its timeout (1 s here):
  // the store must still be there then.
  auto server = std::make_unique<ddp::tcp_store>(opts(0, 0, 1s));
  auto client = std::make_unique<ddp::tcp_store>(opts(server->port(), 1, 1s));
  auto t0 = std::chrono::steady_clock::now();
  std::thread teardown([&] { server.reset(); });
  std::this_thread::sleep_for(1500ms);
  // Rank 0 is tearing down, yet a survivor can still ask who was lost.
  client->set("still", "served");
  CHECK(client->get("still") == "served");
  CHECK(client->wait_for_lost_rank(0ms).rank == -1);
  client.reset(); // says goodbye: the server may go now
  teardown.join();
  auto took = std::chrono::steady_clock::now() - t0;
  CHECK(took >= 1500ms);
  CHECK(took < 3s);
}

TEST_CASE("the linger does not wait for a rank the desync report found silent, nor for its watch") {
  auto o = opts(0, 0);
  o.linger = 2s;
  auto server = std::make_unique<ddp::tcp_store>(o);
  ddp::tcp_store stopped(opts(server->port(), 2)); // never reads again, never leaves
  auto its_watch = stopped.connect_again(5s);      // the same process's second connection
  auto survivor = std::make_unique<ddp::tcp_store>(opts(server->port(), 1));
  ddp::detail::flight_progress at;
  at.seq = 7;
  at.kind = "all_reduce";
  auto other = std::async(std::launch::async,
                          [&] { return ddp::detail::exchange_progress(*survivor, 1, 3, at).culprit; });
  CHECK(ddp::detail::exchange_progress(*server, 0, 3, at).culprit == 2);
  CHECK(other.get() == 2);
  CHECK(server->try_get("ddp/fault/stalled/2"));
  SUBCASE("the linger ends when the other survivors left") {
    std::thread leaver([&] {
      std::this_thread::sleep_for(300ms);
      CHECK(survivor->try_get("ddp/fault/progress/0")); // still served
      survivor.reset();
    });
    auto t0 = std::chrono::steady_clock::now();
    server.reset();
    auto took = std::chrono::steady_clock::now() - t0;
    leaver.join();
    CHECK(took >= 250ms);
    CHECK(took < 1500ms);
  }
  SUBCASE("a survivor that comes late ends its report as soon as it finds the silent rank marked") {
    auto t0 = std::chrono::steady_clock::now();
    CHECK(ddp::detail::exchange_progress(*survivor, 1, 3, at).culprit == 2);
    CHECK(std::chrono::steady_clock::now() - t0 < 1s); // not the 3 s window
  }
  SUBCASE("a rank named silent that reports after all is waited for again, up to the bound") {
    stopped.set(ddp::detail::progress_key("", 2), at.encode());
    survivor.reset();
    auto t0 = std::chrono::steady_clock::now();
    server.reset();
    auto took = std::chrono::steady_clock::now() - t0;
    CHECK(took >= 1900ms);
    CHECK(took < 3s);
  }
}

TEST_CASE(
    "a subgroup's desync report keeps to its own keys: a later report of the job names the right rank") {
  auto server = std::make_unique<ddp::tcp_store>(opts(0, 0));
  auto other = std::make_unique<ddp::tcp_store>(opts(server->port(), 1));
  ddp::detail::flight_progress sub;
  sub.seq = 51; // the subgroup got far ahead of the job's group
  sub.kind = "all_reduce";
  // Job rank 1 alone reports in the subgroup {0, 1}: job rank 0 is named silent there.
  CHECK(ddp::detail::exchange_progress(*other, 1, 2, sub, {0, 1}, "g0c1/").culprit == 0);
  CHECK(other->try_get("ddp/fault/progress/g0c1/1"));
  CHECK_FALSE(other->try_get("ddp/fault/progress/1")); // the job's keys untouched
  CHECK_FALSE(other->try_get("ddp/fault/stalled/0"));  // the store still lingers for rank 0
  // Later the job's own group fails with job rank 1 behind (at #3, rank 0 at #4).
  ddp::detail::flight_progress behind, ahead;
  behind.seq = 3;
  ahead.seq = 4;
  behind.kind = ahead.kind = "all_reduce";
  auto late = std::async(std::launch::async,
                         [&] { return ddp::detail::exchange_progress(*other, 1, 2, behind).culprit; });
  CHECK(ddp::detail::exchange_progress(*server, 0, 2, ahead).culprit == 1); // before: 0, from #51
  CHECK(late.get() == 1);
}

TEST_CASE("the linger is bounded; a rank 0 that failed itself lingers briefly, or not at all") {
  SUBCASE("bounded") {
    auto o = opts(0, 0);
    o.linger = 1s;
    auto server = std::make_unique<ddp::tcp_store>(o);
    ddp::tcp_store stuck(opts(server->port(), 1)); // never leaves
    auto t0 = std::chrono::steady_clock::now();
    server.reset();
    auto took = std::chrono::steady_clock::now() - t0;
    CHECK(took >= 900ms);
    CHECK(took < 3s);
  }
  SUBCASE("linger_briefly: until the others left, at most own_failure_linger") {
    auto server = std::make_unique<ddp::tcp_store>(opts(0, 0));
    auto stuck = std::make_unique<ddp::tcp_store>(opts(server->port(), 1));
    REQUIRE(server->report_failure("its own reason"));
    server->linger_briefly();
    auto t0 = std::chrono::steady_clock::now();
    std::thread leaver([&] {
      std::this_thread::sleep_for(300ms);
      CHECK(stuck->wait_for_lost_rank(0ms).reason == "failed: its own reason"); // still served
      stuck.reset();
    });
    server.reset(); // ends when rank 1 left, not at the bound
    auto took = std::chrono::steady_clock::now() - t0;
    leaver.join();
    CHECK(took >= 250ms);
    CHECK(took < ddp::tcp_store::own_failure_linger);
    // Nobody leaves: the bound.
    server = std::make_unique<ddp::tcp_store>(opts(0, 0));
    ddp::tcp_store never_leaves(opts(server->port(), 1));
    server->linger_briefly();
    t0 = std::chrono::steady_clock::now();
    server.reset();
    took = std::chrono::steady_clock::now() - t0;
    CHECK(took >= ddp::tcp_store::own_failure_linger - 100ms);
    CHECK(took < ddp::tcp_store::own_failure_linger + 1s);
  }
  SUBCASE("stop_serving_at_once") {
    auto server = std::make_unique<ddp::tcp_store>(opts(0, 0));
    ddp::tcp_store other(opts(server->port(), 1));
    server->stop_serving_at_once();
    auto t0 = std::chrono::steady_clock::now();
    server.reset();
    CHECK(std::chrono::steady_clock::now() - t0 < 500ms);
    // The store is gone, so rank 0 is the one to blame: it really left.
    auto lost = other.wait_for_lost_rank(0ms);
    CHECK(lost.rank == 0);
    CHECK(lost.reason.find("gone") != std::string::npos);
  }
}

TEST_CASE("the flight recorder keeps the last 64 collectives and writes them as JSON") {
  ddp::detail::flight_recorder fr;
  CHECK(fr.progress().seq == -1);
  for (std::uint64_t s = 0; s < 70; ++s) {
    fr.queued(s, "all_reduce", ddp::dtype::f32, 1024 + s, s == 69 ? 3 : -1);
    fr.running(s);
    fr.finished(s, s != 69);
  }
  fr.queued(70, "broadcast", ddp::dtype::i64, 8);
  auto all = fr.snapshot();
  REQUIRE(all.size() == 64);
  CHECK(all.front().seq == 7);
  CHECK(all.back().seq == 70);
  CHECK(all.back().state == ddp::detail::flight_state::queued);
  CHECK(all[all.size() - 2].state == ddp::detail::flight_state::failed);
  CHECK(all[all.size() - 2].started_us >= all[all.size() - 2].queued_us);
  auto p = fr.progress(); // the latest that started, not the queued one
  CHECK(p.seq == 69);
  CHECK(p.state == ddp::detail::flight_state::failed);
  auto back = ddp::detail::flight_progress::decode(p.encode());
  CHECK(back.seq == 69);
  CHECK(back.kind == "all_reduce");
  CHECK(back.state == ddp::detail::flight_state::failed);
  fr.note("rank 2 sent no \"report\"");
  auto j = fr.to_json(1);
  CHECK(j.find("\"rank\": 1") != std::string::npos);
  CHECK(j.find(
            "{\"seq\": 69, \"kind\": \"all_reduce\", \"dtype\": \"float32\", \"count\": 1093, \"bucket\": 3, "
            "\"state\": \"failed\"") != std::string::npos);
  CHECK(j.find("\"seq\": 6,") == std::string::npos); // fell off the ring
  CHECK(j.find("sent no \\\"report\\\"") != std::string::npos);
}

TEST_CASE("the flight recorder keeps send/recv messages apart from the collectives' sequence") {
  ddp::detail::flight_recorder fr;
  fr.queued(0, "all_reduce", ddp::dtype::f32, 4);
  const auto a = fr.message_queued("rank 0: send #0 to rank 1 (4 x float32)");
  const auto b = fr.message_queued("rank 0: recv #0 from rank 1 (4 x float32)");
  fr.message_running(a);
  fr.message_finished(a, true);
  fr.message_running(b);
  fr.message_finished(b, false);
  CHECK(fr.progress().seq == -1); // messages are no progress of the collectives
  REQUIRE(fr.snapshot().size() == 1);
  auto m = fr.messages();
  REQUIRE(m.size() == 2);
  CHECK(m[0].state == ddp::detail::flight_state::done);
  CHECK(m[1].state == ddp::detail::flight_state::failed);
  auto j = fr.to_json(0);
  CHECK(j.find("\"messages\": [") != std::string::npos);
  CHECK(
      j.find("{\"id\": 1, \"what\": \"rank 0: recv #0 from rank 1 (4 x float32)\", \"state\": \"failed\"") !=
      std::string::npos);
}

TEST_CASE("scoped keys (restart rounds): a rank lost in one round does not end the next round's waits") {
  // As under ddprun: the launcher serves (rank -1, no scope); each round's ranks scope their keys.
  auto launcher_opts = opts(0, -1);
  ddp::tcp_store launcher(launcher_opts);
  auto in_round = [&](int round, int rank) {
    auto o = opts(launcher.port(), rank);
    // Not "r" + std::to_string(round) (nor assigning "r"): g++ 12's false -Wrestrict at -O3.
    std::string scope(1, 'r');
    scope += std::to_string(round);
    scope += '/';
    o.scope = std::move(scope);
    o.served_by_launcher = true;
    return std::make_unique<ddp::tcp_store>(o);
  };
  auto r0_waiter = in_round(0, 0);
  auto r0_victim = in_round(0, 1);
  r0_victim->set("ddp/arrived/1", "1");
  CHECK(launcher.check({"r0/ddp/arrived/1"})); // the prefix is on the wire: the store holds it so
  CHECK_FALSE(launcher.check({"ddp/arrived/1"}));
  REQUIRE(r0_victim->report_failure("killed"));
  CHECK_THROWS_AS(r0_waiter->wait({"ddp/arrived/2"}, 2s), ddp::error); // round 0: lost, at once
  CHECK(r0_waiter->wait_for_lost_rank(0ms).rank == 1);
  r0_waiter.reset();
  r0_victim.reset();

  // Round 1: the same ranks again. Nothing of round 0 shows, and waits run their course.
  auto r1_a = in_round(1, 0);
  auto r1_b = in_round(1, 1);
  CHECK_FALSE(r1_a->check({"ddp/arrived/1"}));
  CHECK_FALSE(r1_a->wait_for_lost_rank(0ms));
  auto t0 = std::chrono::steady_clock::now();
  auto setter = std::async(std::launch::async, [&] {
    std::this_thread::sleep_for(300ms);
    r1_b->set("ddp/arrived/1", "1");
  });
  r1_a->wait({"ddp/arrived/1"}, 4s); // would be answered "lost, rank 1" without scopes
  setter.get();
  CHECK(std::chrono::steady_clock::now() - t0 >= 250ms);
  // A loss in round 1 is round 1's: named, under round 1's prefix.
  REQUIRE(r1_b->report_failure("again"));
  auto lost = r1_a->wait_for_lost_rank(0ms);
  CHECK(lost.rank == 1);
  CHECK(lost.reason == "failed: again");
  CHECK(launcher.try_get("r1/ddp/lost") == std::optional<std::string>("1"));
}

TEST_CASE("a store served by the launcher: when it vanishes, no rank is blamed") {
  auto launcher = std::make_unique<ddp::tcp_store>(opts(0, -1));
  auto o = opts(launcher->port(), 1, 2s);
  o.served_by_launcher = true;
  ddp::tcp_store client(o);
  launcher->stop_serving_at_once();
  launcher.reset();
  auto lost = client.wait_for_lost_rank(100ms);
  CHECK(lost.rank == -1); // not "rank 0": rank 0 does not serve it
}

namespace {
/// What a peer_failure_watch handed over, for the test thread to wait on.
struct heard {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<ddp::lost_rank> calls;
  std::chrono::steady_clock::time_point at;
  auto callback() {
    return [this](const ddp::lost_rank& l) {
      std::lock_guard lock(mu);
      calls.push_back(l);
      at = std::chrono::steady_clock::now();
      cv.notify_all();
    };
  }
  bool wait(std::chrono::milliseconds d) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, d, [&] { return !calls.empty(); });
  }
};
} // namespace

TEST_CASE("peer_failure_watch: another rank's report or dropped connection is heard at once, once") {
  ddp::tcp_store server(opts(0, 0, 20s));
  ddp::tcp_store me(opts(server.port(), 1, 20s));
  SUBCASE("a rank reports its own failure") {
    ddp::tcp_store victim(opts(server.port(), 2, 20s));
    heard h;
    ddp::detail::peer_failure_watch watch(me, 1, h.callback());
    std::this_thread::sleep_for(200ms); // the watch is waiting in the store by now (if not, it finds the key)
    auto t0 = std::chrono::steady_clock::now();
    REQUIRE(victim.report_failure("batch 7 could not be read"));
    REQUIRE(h.wait(5s));
    CHECK(h.at - t0 < 1s); // the store answers the wait: no polling period
    std::this_thread::sleep_for(100ms);
    watch.stop();
    std::lock_guard lock(h.mu);
    REQUIRE(h.calls.size() == 1);
    CHECK(h.calls[0].rank == 2);
    CHECK(h.calls[0].reason == "failed: batch 7 could not be read");
  }
  SUBCASE("a rank's connection drops without a goodbye") {
    auto victim = std::make_unique<ddp::tcp_store>(opts(server.port(), 3, 20s));
    heard h;
    ddp::detail::peer_failure_watch watch(me, 1, h.callback());
    victim->shutdown_connection(); // as a crash would: no goodbye
    victim.reset();
    REQUIRE(h.wait(5s));
    std::lock_guard lock(h.mu);
    CHECK(h.calls.at(0).rank == 3);
    CHECK(h.calls.at(0).reason == "exited or lost its connection");
  }
  SUBCASE("this rank's own failure is not handed over") {
    heard h;
    ddp::detail::peer_failure_watch watch(me, 1, h.callback());
    REQUIRE(me.report_failure("its own reason"));
    CHECK_FALSE(h.wait(500ms));
  }
}

TEST_CASE("peer_failure_watch: stopping it is prompt, says nothing, and loses nobody") {
  ddp::tcp_store server(opts(0, 0, 20s));
  ddp::tcp_store me(opts(server.port(), 1, 20s));
  heard h;
  auto t0 = std::chrono::steady_clock::now();
  {
    ddp::detail::peer_failure_watch watch(me, 1, h.callback());
    std::this_thread::sleep_for(100ms);
  } // stopped while its wait (20 s) is pending in the store
  CHECK(std::chrono::steady_clock::now() - t0 < 1s);
  std::this_thread::sleep_for(200ms); // the server has seen the dropped connection by now
  CHECK_FALSE(me.wait_for_lost_rank(0ms));
  std::lock_guard lock(h.mu);
  CHECK(h.calls.empty());
}

TEST_CASE("peer_failure_watch: a store rank 0 serves that vanishes is rank 0's loss; ddprun's is news "
          "naming no rank") {
  SUBCASE("rank 0 serves it") {
    auto server = std::make_unique<ddp::tcp_store>(opts(0, 0, 20s));
    ddp::tcp_store me(opts(server->port(), 1, 20s));
    heard h;
    ddp::detail::peer_failure_watch watch(me, 1, h.callback());
    server->stop_serving_at_once();
    server.reset();
    REQUIRE(h.wait(5s));
    std::lock_guard lock(h.mu);
    CHECK(h.calls.at(0).rank == 0);
    CHECK(h.calls.at(0).reason.find("gone") != std::string::npos);
  }
  SUBCASE("ddprun serves it") {
    auto launcher = std::make_unique<ddp::tcp_store>(opts(0, -1, 20s));
    auto o = opts(launcher->port(), 1, 20s);
    o.served_by_launcher = true;
    ddp::tcp_store me(o);
    heard h;
    ddp::detail::peer_failure_watch watch(me, 1, h.callback());
    launcher->stop_serving_at_once();
    launcher.reset();
    // ddprun died, not a rank, and nobody else would end this one (killed by SIGKILL).
    REQUIRE(h.wait(5s));
    std::lock_guard lock(h.mu);
    CHECK(h.calls.at(0).rank == -1);
    CHECK(h.calls.at(0).reason.find("the launcher is gone") != std::string::npos);
    CHECK(h.calls.at(0).reason.find("127.0.0.1:" + std::to_string(o.port)) != std::string::npos);
  }
}
