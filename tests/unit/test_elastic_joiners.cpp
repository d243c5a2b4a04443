// Joiners' admission by claim (ddp/detail/elastic/joiners.hpp) over a real tcp_store in one
// process: one atomic add decides a claim, so a joiner is admitted or withdrawn, never both,
// whichever comes first, and every reader learns the decision from the claim alone.
#include <ddp/detail/elastic/joiners.hpp>
#include <ddp/store.hpp>

#include "../support/local_store.hpp"

#include <doctest/doctest.h>

#include <future>
#include <string>
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
  // The loser took its delta back: the claim still says generation 3 to every reader.
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

TEST_CASE("the job's end is one key every waiting joiner looks at") {
  auto s = ddp_test::local_server(-1);
  CHECK_FALSE(ddp::detail::job_ended(s));
  ddp::detail::mark_job_ended(s);
  CHECK(ddp::detail::job_ended(s));
  // A joiner that registers after the end withdraws at once: wait_for_admission says nothing.
  CHECK_FALSE(ddp::detail::wait_for_admission(s, {"rank2.1", 2, 0}, 10s).has_value());
  CHECK(ddp::detail::read_claim(s, "rank2.1").state == joiner_claim::what::withdrawn);
}
