// ddprun's verdict under in-process recovery across nodes (tools/ddprun/verdict.hpp): a user's
// stop first, then the last generation's members by job rank, a member with no end counting as
// lost with its node. The generations come from a real store served in process.
#include "verdict.hpp"

#include "../support/local_store.hpp"

#include <doctest/doctest.h>

using namespace std::chrono_literals;

namespace {
ddp::tcp_store serving() { return ddp_test::local_server(0); }
std::map<int, ddprun::rank_end> ends(std::initializer_list<std::pair<int, int>> codes) {
  std::map<int, ddprun::rank_end> m;
  for (auto [rank, code] : codes)
    m[rank] = {rank, code, code == 0 ? "exited with code 0" : "exited with code " + std::to_string(code)};
  return m;
}
constexpr std::optional<std::pair<int, int>> no_stop;
} // namespace

TEST_CASE("every member of generation 0 ended with 0: the job succeeded") {
  ddprun::generations g(4);
  const auto v = ddprun::decide_verdict(no_stop, g, ends({{0, 0}, {1, 0}, {2, 0}, {3, 0}}), 2);
  CHECK(v == "0 every rank of generation 0 (4 ranks) finished well");
  CHECK(ddprun::verdict_code(v) == 0);
}

TEST_CASE("a user's stop comes first, whatever the ranks' codes") {
  ddprun::generations g(4);
  const auto v = ddprun::decide_verdict(std::pair{1, 15}, g, ends({{0, 0}, {1, 3}, {3, 9}}), 2);
  CHECK(v == "143 node 1's ddprun got signal 15 from the user, which stops every node");
  CHECK(ddprun::verdict_code(v) == 143);
}

TEST_CASE(
    "the lowest member that did not end with 0 gives its code; ranks out of the generation do not count") {
  auto s = serving();
  s.set("r0/meet/g1/members", "0 0\n2 1\n3 1\n"); // job rank 1 lost: generation 1 is 0, 2, 3
  ddprun::generations g(4);
  REQUIRE(g.update(s, 0));
  const auto v = ddprun::decide_verdict(no_stop, g, ends({{0, 0}, {1, 9}, {2, 7}, {3, 4}}), 2);
  CHECK(v == "7 rank 2 of generation 1 exited with code 7");
  CHECK(ddprun::verdict_code(v) == 7);
  CHECK(ddprun::decide_verdict(no_stop, g, ends({{0, 0}, {1, 9}, {2, 0}, {3, 0}}), 2) ==
        "0 every rank of generation 1 (3 ranks) finished well");
}

TEST_CASE("a member with no end was on a lost node: 1, naming its node") {
  auto s = serving();
  s.set("r0/meet/g1/members", "0 0\n1 0\n3 1\n"); // job rank 2 lost
  ddprun::generations g(4);
  REQUIRE(g.update(s, 0));
  // Node 1's agent was lost with its ranks 2 and 3: no end of either is known.
  const auto v = ddprun::decide_verdict(no_stop, g, ends({{0, 0}, {1, 0}}), 2);
  CHECK(v == "1 rank 3 of generation 1 was on node 1, which was lost");
  CHECK(ddprun::verdict_code(v) == 1);
}

TEST_CASE("a verdict without a code a process can exit with reads as 1") {
  CHECK(ddprun::verdict_code("300 a code too large") == 1);
  CHECK(ddprun::verdict_code("x no code") == 1);
  CHECK(ddprun::verdict_code("-2 negative") == 1);
}
