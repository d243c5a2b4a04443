// Joiners' admission by claim (ddp/detail/elastic/joiners.hpp) over a real tcp_store in one
// process: one compare_set (set-if-absent) decides a claim, so a joiner is admitted or
// withdrawn, never both, whichever comes first, and every reader learns the decision from the
// claim alone; the meeting after a loss expects the joiners a lost rank 0 admitted, by their
// claims. Asking whether the job ended, a store error is no end.
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
using ddp::detail::joiner_claim;

TEST_CASE("an admission first: the withdrawal loses and reads the generation") {
  auto s = ddp_test::local_server(-1);
  ddp::detail::register_joiner(s, {"rank2.1", 2, 0});
  CHECK(ddp::detail::read_claim(s, "rank2.1").state == joiner_claim::what::waiting);
  const auto admitted = ddp::detail::admit_waiting_joiners(s, 3);
  REQUIRE(admitted.size() == 1);
  CHECK(admitted[0].id == "rank2.1");
  CHECK(admitted[0].job_rank == 2);
  const auto c = ddp::detail::settle_claim(s, "rank2.1", ddp::detail::joiner_withdrawn);
  CHECK(c.state == joiner_claim::what::admitted);
  CHECK(c.generation == 3);
  // The loser wrote nothing: the decision still says generation 3 to every reader.
  CHECK(ddp::detail::read_claim(s, "rank2.1").generation == 3);
  CHECK(ddp::detail::joiners_admitted_to(s, 3).size() == 1);
  // Its agent saw it die: the meeting it was admitted to no longer expects it.
  ddp::detail::mark_joiner_lost(s, "rank2.1");
  CHECK(ddp::detail::joiners_admitted_to(s, 3).empty());
}

TEST_CASE("a withdrawal first: no later commit admits the joiner") {
  auto s = ddp_test::local_server(-1);
  ddp::detail::register_joiner(s, {"rank1.1", 1, 0});
  CHECK(ddp::detail::settle_claim(s, "rank1.1", ddp::detail::joiner_withdrawn).state ==
        joiner_claim::what::withdrawn);
  CHECK(ddp::detail::admit_waiting_joiners(s, 2).empty());
  CHECK(ddp::detail::settle_claim(s, "rank1.1", 2).state == joiner_claim::what::withdrawn);
  CHECK(ddp::detail::read_claim(s, "rank1.1").state == joiner_claim::what::withdrawn);
  CHECK(ddp::detail::joiners_admitted_to(s, 2).empty());
}

TEST_CASE("an admission and a withdrawal at once: exactly one wins, and both agree which") {
  auto o = ddp_test::local_server_options();
  auto s = ddp_test::local_server(-1);
  for (int round = 0; round < 50; ++round) {
    const std::string id = "rank0." + std::to_string(round);
    ddp::detail::register_joiner(s, {id, 0, 0});
    auto client = [&] {
      auto co = o;
      co.serve = false;
      co.port = s.port();
      return co;
    };
    auto admit = std::async(std::launch::async, [&] {
      ddp::tcp_store c(client());
      return ddp::detail::settle_claim(c, id, 5);
    });
    auto withdraw = std::async(std::launch::async, [&] {
      ddp::tcp_store c(client());
      return ddp::detail::settle_claim(c, id, ddp::detail::joiner_withdrawn);
    });
    const auto a = admit.get(), w = withdraw.get();
    CHECK(a.state == w.state); // both read the one decision
    const auto now = ddp::detail::read_claim(s, id);
    CHECK(now.state == a.state);
    CHECK((now.state == joiner_claim::what::admitted ? now.generation == 5
                                                     : now.state == joiner_claim::what::withdrawn));
  }
}

TEST_CASE("compare_set: set-if-absent stands, a wrong expectation changes nothing") {
  auto s = ddp_test::local_server(-1);
  CHECK_FALSE(s.compare_set("k", "x", "y").has_value()); // absent holds "" only: nothing set
  CHECK_FALSE(s.try_get("k").has_value());
  CHECK(s.compare_set("k", "", "first") == "first");
  CHECK(s.compare_set("k", "", "second") == "first"); // set-if-absent: the first value stands
  CHECK(s.compare_set("k", "other", "third") == "first");
  CHECK(s.compare_set("k", "first", "fourth") == "fourth"); // the expected value: replaced
  CHECK(s.get("k") == "fourth");
}

TEST_CASE("compare_set: set-if-absent of an empty value is refused, since it would not stand") {
  auto s = ddp_test::local_server(-1);
  try {
    (void)s.compare_set("e", "", "");
    FAIL("an empty set-if-absent was accepted");
  } catch (const ddp::error& e) {
    CHECK(e.kind() == ddp::error_kind::config);
    CHECK(std::string(e.what()).find("'e'") != std::string::npos);
  }
  CHECK_FALSE(s.try_get("e").has_value());
  CHECK(s.compare_set("e", "", "x") == "x"); // the first non-empty value stands
  CHECK(s.compare_set("e", "x", "") == "");  // an empty value is fine where a value is expected
}

TEST_CASE("a decision stands whoever is slow: no later decider or reader overwrites it") {
  auto s = ddp_test::local_server(-1);
  ddp::detail::register_joiner(s, {"rank1.1", 1, 0});
  // A reader that gave up on the joiner withdraws it; a decider slower than any wait comes later
  // (before compare_set, a winner between its flag and its value could overwrite the withdrawal).
  CHECK(ddp::detail::settle_claim(s, "rank1.1", ddp::detail::joiner_withdrawn).state ==
        joiner_claim::what::withdrawn);
  CHECK(ddp::detail::settle_claim(s, "rank1.1", 4).state == joiner_claim::what::withdrawn);
  CHECK(ddp::detail::admit_waiting_joiners(s, 4).empty());
  CHECK(ddp::detail::read_claim(s, "rank1.1").state == joiner_claim::what::withdrawn);
}

TEST_CASE("a registry read across commits agrees with a fresh read: decided joiners are kept, not reread") {
  auto s = ddp_test::local_server(-1);
  ddp::detail::joiner_registry seen;
  ddp::detail::register_joiner(s, {"rank1.1", 1, 0});
  ddp::detail::register_joiner(s, {"rank2.1", 2, 0});
  CHECK(ddp::detail::settle_claim(s, "rank1.1", ddp::detail::joiner_withdrawn).state ==
        joiner_claim::what::withdrawn);
  auto a = ddp::detail::admit_waiting_joiners(s, 2, seen); // the commit of generation 1
  REQUIRE(a.size() == 1);
  CHECK(a[0].id == "rank2.1");
  CHECK(seen.entries.size() == 2);
  CHECK(seen.claims[0].state == joiner_claim::what::withdrawn);
  CHECK(seen.claims[1].generation == 2);
  ddp::detail::register_joiner(s, {"rank0.1", 0, 0}); // a later joiner, admitted at the next commit
  a = ddp::detail::admit_waiting_joiners(s, 3, seen);
  REQUIRE(a.size() == 1);
  CHECK(a[0].id == "rank0.1");
  CHECK(seen.entries.size() == 3); // the two decided ones were not read again
  CHECK(ddp::detail::joiners_admitted_to(s, 3, seen).size() == 1);
  CHECK(ddp::detail::joiners_admitted_to(s, 2).size() == 1); // a fresh read says the same
  ddp::detail::mark_joiner_lost(s, "rank0.1");
  CHECK(ddp::detail::joiners_admitted_to(s, 3, seen).empty()); // the lost mark is read every look
}

TEST_CASE("the job's end is one key every waiting joiner looks at") {
  auto s = std::make_unique<ddp::tcp_store>(ddp_test::local_server_options());
  CHECK_FALSE(ddp::detail::job_ended(s));
  ddp::detail::mark_job_ended(*s);
  CHECK(ddp::detail::job_ended(s));
  // A joiner that registers after the end withdraws at once: wait_for_admission says nothing.
  CHECK_FALSE(ddp::detail::wait_for_admission(s, {"rank2.1", 2, 0}, 10s).has_value());
  CHECK(ddp::detail::read_claim(*s, "rank2.1").state == joiner_claim::what::withdrawn);
}

TEST_CASE("a joiner withdrawn by another while the job runs fails; it says nothing only once the job ended") {
  auto s = std::make_unique<ddp::tcp_store>(ddp_test::local_server_options());
  // Its agent took it for dead and withdrew it (a joiner sees this only when it is not dead).
  REQUIRE(ddp::detail::settle_claim(*s, "rank1.2", ddp::detail::joiner_withdrawn).state ==
          joiner_claim::what::withdrawn);
  try {
    (void)ddp::detail::wait_for_admission(s, {"rank1.2", 1, 0}, 10s);
    FAIL("wait_for_admission returned while the job runs");
  } catch (const ddp::error& e) {
    CHECK(e.kind() == ddp::error_kind::peer_lost);
    CHECK(std::string(e.what()).find("joiner rank1.2") != std::string::npos);
  }
  ddp::detail::mark_job_ended(*s);
  REQUIRE(ddp::detail::settle_claim(*s, "rank1.3", ddp::detail::joiner_withdrawn).state ==
          joiner_claim::what::withdrawn);
  CHECK_FALSE(ddp::detail::wait_for_admission(s, {"rank1.3", 1, 0}, 10s).has_value());
}

TEST_CASE("a store error is no end of the job: asked again on a connection that stays, a lasting one named") {
  auto server = std::make_unique<ddp::tcp_store>(ddp_test::local_server_options());
  auto o = ddp_test::local_server_options();
  o.serve = false;
  o.port = server->port();
  auto c = std::make_unique<ddp::tcp_store>(o);
  const ddp::tcp_store* broken = c.get();
  c->shutdown_connection();                       // a connection broken once: the store is still there
  CHECK_FALSE(ddp::detail::job_ended(c, "", 5s)); // before: the error went out (ddprun: "ended")
  CHECK(c.get() != broken);                       // the caller now holds the connection that answered
  c->set("usable", "1");                          // and its later requests go through
  ddp::detail::mark_job_ended(*server);
  CHECK(ddp::detail::job_ended(c, "", 5s));
  const std::string where = "127.0.0.1:" + std::to_string(server->port());
  server->stop_serving_at_once(); // no linger for the client's live connection
  server.reset();                 // the store's host gone for good
  const auto t0 = std::chrono::steady_clock::now();
  try {
    (void)ddp::detail::job_ended(c, "", 300ms);
    FAIL("a store that is gone said whether the job ended");
  } catch (const ddp::error& e) {
    CHECK(e.kind() == ddp::error_kind::backend);
    CHECK(std::string(e.what()).find(where) != std::string::npos);
  }
  // The whole call is bounded: 300 ms + 2 x job_end_look_floor, and generous slack for a loaded machine.
  const auto took = std::chrono::steady_clock::now() - t0;
  CHECK(took >= 200ms);
  CHECK(took < 300ms + 2 * ddp::detail::job_end_look_floor + 1500ms);
}

TEST_CASE("a silent store bounds job_ended hard: no look waits the store's own timeout") {
  auto server = std::make_unique<ddp::tcp_store>(ddp_test::local_server_options());
  const int port = server->port();
  auto o = ddp_test::local_server_options();
  o.serve = false;
  o.port = port;
  o.timeout = 30s; // the store's own timeout, which no look may wait
  auto c = std::make_unique<ddp::tcp_store>(o);
  server->stop_serving_at_once(); // no linger for the client's live connection
  server.reset();
  // The port listens again but never answers (the kernel accepts; nobody reads): a stopped host.
  const auto silent = ddp::detail::listen_tcp("127.0.0.1", port);
  const auto t0 = std::chrono::steady_clock::now();
  CHECK_THROWS_AS((void)ddp::detail::job_ended(c, "", 500ms), ddp::error);
  const auto took = std::chrono::steady_clock::now() - t0;
  CHECK(took >= 400ms);
  CHECK(took < 500ms + 2 * ddp::detail::job_end_look_floor + 1500ms);
}

namespace {

ddp::topology job_on(int port, int rank = 0) {
  ddp::topology t;
  t.master_addr = "127.0.0.1";
  t.store_port = port;
  t.world_size = 3;
  t.rank = rank;
  return t;
}

/// Rank `rank` of generation 0 drops without a goodbye (as a crash), and the store records it.
void lose(ddp::tcp_store& server, int rank) {
  {
    auto fd = ddp::detail::connect_tcp("127.0.0.1", server.port(), ddp::detail::clock::now() + 2s);
    REQUIRE(ddp::detail::client_handshake(fd.get(), "secret", rank, ddp::detail::clock::now() + 2s) ==
            ddp::detail::handshake_result::ok);
  }
  for (int look = 0; look < 200 && server.lost_ranks().empty(); ++look)
    std::this_thread::sleep_for(10ms);
}

/// Rank 0 of generation 0 admitted joiner "rank0.1" (the slot of a rank lost before) to
/// generation 1, then died before it could tell anyone: only the claim says so.
void admitted_by_lost_rank_0(ddp::tcp_store& server, const ddp::topology& job) {
  REQUIRE(::setenv("DDP_ELASTIC_JOINERS", "1", 1) == 0); // the survivors' meeting looks for joiners
  ddp::tcp_store joins(ddp::detail::joiners_store_options(job, 5s, "secret"));
  ddp::detail::register_joiner(joins, {"rank0.1", 0, 0});
  REQUIRE(ddp::detail::admit_waiting_joiners(joins, 1).size() == 1);
  lose(server, 0);
}

std::future<ddp::detail::elastic_generation> survivor(const ddp::topology& job, int old_rank,
                                                      std::chrono::milliseconds last_call) {
  return std::async(std::launch::async, [=] {
    return ddp::detail::meet_survivors(job, {old_rank, 0}, 3, 1, last_call, 5s, "secret");
  });
}

} // namespace

TEST_CASE("the meeting after rank 0's loss expects the joiner it admitted, by its claim") {
  ddp::tcp_store server(ddp_test::local_server_options());
  const auto job = job_on(server.port());
  admitted_by_lost_rank_0(server, job);
  auto a = survivor(job, 1, 3s);
  auto b = survivor(job, 2, 3s);
  auto joiner = std::async(std::launch::async, [&] {
    std::this_thread::sleep_for(200ms); // after the survivors: it is waited for
    return ddp::detail::meet_as_joiner(job_on(server.port(), 0), "rank0.1", 1, 3s, 5s, "secret");
  });
  const auto ga = a.get(), gb = b.get(), gj = joiner.get();
  CHECK(ga.rv.topo.world_size == 3);
  CHECK(ga.rv.topo.rank == 0);
  CHECK(gb.rv.topo.rank == 1);
  CHECK(gj.rv.topo.rank == 2); // after every survivor: rank 0, which sends the state, is one
  CHECK(gj.members[2].old_rank == ddp::detail::joiner_rank_base + 0);
}

TEST_CASE("an admitted joiner that never comes is waited for up to the last call, one seen dead not at all") {
  ddp::tcp_store server(ddp_test::local_server_options());
  const auto job = job_on(server.port());
  admitted_by_lost_rank_0(server, job);
  SUBCASE("never comes") {
    const auto t0 = std::chrono::steady_clock::now();
    auto a = survivor(job, 1, 1s);
    auto b = survivor(job, 2, 1s);
    CHECK(a.get().members.size() == 2);
    CHECK(b.get().rv.topo.world_size == 2);
    const auto took = std::chrono::steady_clock::now() - t0;
    CHECK(took >= 1s);
    CHECK(took < 4s); // the last call, not the 5 s timeout
  }
  SUBCASE("its agent saw it die") {
    ddp::tcp_store joins(ddp::detail::joiners_store_options(job, 5s, "secret"));
    CHECK(ddp::detail::settle_claim(joins, "rank0.1", ddp::detail::joiner_withdrawn).state ==
          joiner_claim::what::admitted);
    ddp::detail::mark_joiner_lost(joins, "rank0.1");
    const auto t0 = std::chrono::steady_clock::now();
    auto a = survivor(job, 1, 3s);
    auto b = survivor(job, 2, 3s);
    CHECK(a.get().members.size() == 2);
    CHECK(b.get().members.size() == 2);
    CHECK(std::chrono::steady_clock::now() - t0 < 2s); // not the 3 s last call
  }
}

TEST_CASE(
    "a joiner whose slot's job rank is still a member stays waiting: a stalled node's, not a lost one's") {
  auto s = ddp_test::local_server(-1);
  ddp::detail::register_joiner(s, {"rank2.2", 2, 2});
  ddp::detail::joiner_registry seen;
  CHECK(ddp::detail::admit_waiting_joiners(s, 3, seen, {0, 1, 2}).empty());
  CHECK(ddp::detail::read_claim(s, "rank2.2").state == joiner_claim::what::waiting);
  // The job lost rank 2: the next commit admits it.
  const auto admitted = ddp::detail::admit_waiting_joiners(s, 4, seen, {0, 1});
  REQUIRE(admitted.size() == 1);
  CHECK(admitted[0].id == "rank2.2");
}
