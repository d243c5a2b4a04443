// ddprun's generations (tools/ddprun/generations.hpp) over a real store served in process: each
// agent must follow every member back to its job rank through every generation before.
#include "generations.hpp"

#include "../support/local_store.hpp"

#include <doctest/doctest.h>

#include <memory>

using namespace std::chrono_literals;

namespace {
ddp::tcp_store serving() { return ddp_test::local_server(0); }
void publish(ddp::tcp_store& s, int generation, const std::string& members) {
  s.set("r0/meet/g" + std::to_string(generation) + "/members", members);
}
} // namespace

TEST_CASE("before any meeting, every job rank is of generation 0") {
  auto s = serving();
  ddprun::generations g(4);
  CHECK_FALSE(g.update(s, 0));
  CHECK(g.latest() == 0);
  CHECK(g.members() == std::vector<int>{0, 1, 2, 3});
}

TEST_CASE("a member is named by its rank in the generation before, followed back to its job rank") {
  auto s = serving();
  ddprun::generations g(4);
  publish(s, 1, "0 0\n2 1\n3 1\n"); // job rank 1 lost: generation 1 is job ranks 0, 2, 3
  CHECK(g.update(s, 0));
  CHECK(g.latest() == 1);
  CHECK(g.members() == std::vector<int>{0, 2, 3});
  CHECK_FALSE(g.update(s, 0));
  // Generation 1's rank 1 (job rank 2) lost: generation 2 is job ranks 0 and 3, not 0 and 2.
  publish(s, 2, "0 0\n2 1\n");
  CHECK(g.update(s, 0));
  CHECK(g.latest() == 2);
  CHECK(g.members() == std::vector<int>{0, 3});
  CHECK(g.member(3));
  CHECK_FALSE(g.member(2));
}

TEST_CASE("generations published between two looks are followed in order; another round's are not") {
  auto s = serving();
  publish(s, 1, "1 0\n2 1\n3 1\n");
  publish(s, 2, "1 1\n2 1\n");
  s.set("r1/meet/g3/members", "0 0\n");
  ddprun::generations g(4);
  CHECK(g.update(s, 0));
  CHECK(g.latest() == 2);
  CHECK(g.members() == std::vector<int>{2, 3});
}

TEST_CASE("a joiner is named by the slot it was started in, and dated by the generation it joined") {
  auto s = serving();
  ddprun::generations g(3);
  publish(s, 1, "0 0\n1 0\n"); // job rank 2 lost
  CHECK(g.update(s, 0));
  CHECK_FALSE(g.member(2));
  const int started_after = g.latest(); // its agent started a joiner in rank 2's slot here
  publish(s, 2, "0 0\n1 0\n" + std::to_string((1 << 24) + 2) + " 0\n");
  CHECK(g.update(s, 0));
  CHECK(g.members() == std::vector<int>{0, 1, 2});
  CHECK(g.member_since_above(2, started_after));
  CHECK_FALSE(g.member_since_at_most(2, started_after));
  CHECK(g.member_since_at_most(0, started_after)); // a survivor since the job's start
  // Generation 2's rank 2 is the joiner: followed back to job rank 2, still dated generation 2.
  publish(s, 3, "1 0\n2 0\n");
  CHECK(g.update(s, 0));
  CHECK(g.members() == std::vector<int>{1, 2});
  CHECK(g.member_since_above(2, 1));
  CHECK_FALSE(g.member_since_above(2, 2));
}

TEST_CASE("a joiner that joined, then was left out, has still entered: it no longer waits") {
  auto s = serving();
  ddprun::generations g(2);
  publish(s, 1, "0 0\n"); // job rank 1 lost; a joiner started in its slot after generation 1
  CHECK(g.update(s, 0));
  CHECK_FALSE(g.joiner_entered_after(1, 1));
  publish(s, 2, "0 0\n" + std::to_string((1 << 24) + 1) + " 1\n");
  CHECK(g.update(s, 0));
  CHECK(g.joiner_entered_after(1, 1));
  CHECK(g.joiner_entered(1, 2));
  CHECK(g.member_entered_at(1, 2));
  publish(s, 3, "0 0\n"); // the meeting of generation 3 left it out
  CHECK(g.update(s, 0));
  CHECK_FALSE(g.member(1));
  CHECK(g.joiner_entered(1, 2)); // joined, then left out: not a joiner that waits
  CHECK_FALSE(g.member_entered_at(1, 2));
  CHECK_FALSE(g.joiner_entered_after(1, 3)); // a later joiner in the slot has not joined
  CHECK_FALSE(g.joiner_entered_after(0, 0)); // no joiner ever entered rank 0's slot
}

TEST_CASE("two joiners of one slot entered different generations: each is told by its own") {
  auto s = serving();
  ddprun::generations g(2);
  publish(s, 1, "0 0\n");                                          // job rank 1 lost
  publish(s, 2, "0 0\n" + std::to_string((1 << 24) + 1) + " 1\n"); // rank1.1 admitted to 2
  CHECK(g.update(s, 0));
  // rank1.1 then died; its agent started rank1.2 when generation 2 was the latest, and
  // generation 3 left rank1.1 out: a generation above rank1.2's start has a joiner in the slot
  // only if one is rank1.2's own admission.
  publish(s, 3, "0 0\n");
  CHECK(g.update(s, 0));
  CHECK_FALSE(g.joiner_entered_after(1, 2));
  CHECK_FALSE(g.joiner_entered(1, 3));
  publish(s, 4, "0 0\n" + std::to_string((1 << 24) + 1) + " 1\n"); // rank1.2 admitted to 4
  CHECK(g.update(s, 0));
  CHECK(g.joiner_entered(1, 4));
  CHECK(g.member_entered_at(1, 4));
  CHECK_FALSE(g.member_entered_at(1, 2)); // the member of generation 4 is not rank1.1
}

TEST_CASE("a rank out of the generation before is ignored") {
  auto s = serving();
  publish(s, 1, "0 0\n7 1\n-1 0\n1 0\n");
  ddprun::generations g(2);
  CHECK(g.update(s, 0));
  CHECK(g.members() == std::vector<int>{0, 1});
}

TEST_CASE("update throws when the store does not answer, and keeps the generation it had") {
  ddp::tcp_store_options so;
  so.port = 0;
  so.serve = true;
  so.timeout = 2s;
  so.token = "secret";
  so.rank = 0;
  so.linger = 0ms;
  auto server = std::make_unique<ddp::tcp_store>(so);
  ddp::tcp_store_options co = so;
  co.port = server->port();
  co.serve = false;
  co.rank = 1;
  ddp::tcp_store client(co);
  publish(*server, 1, "0 0\n2 1\n3 1\n");
  ddprun::generations g(4);
  CHECK(g.update(client, 0));
  server.reset(); // node 0's agent gone, its store with it
  CHECK_THROWS(g.update(client, 0));
  CHECK(g.latest() == 1);
  CHECK(g.members() == std::vector<int>{0, 2, 3});
}
