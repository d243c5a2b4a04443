// ddprun's incarnations of a node (tools/ddprun/node_incarnation.hpp) over a real store served in
// process: one winner among agents racing for a lost agent's place, node 0's count of the node as
// lost and a rejoin decided on one key, and each incarnation's own record of its ranks' ends.
#include "node_incarnation.hpp"

#include "../support/local_store.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

namespace {
std::unique_ptr<ddp::tcp_store> serve() {
  auto o = ddp_test::local_server_options();
  o.rank = 0;
  return std::make_unique<ddp::tcp_store>(o);
}
} // namespace

TEST_CASE("of agents racing for a lost agent's place, exactly one wins, on their own connections") {
  auto host = serve();
  std::atomic<int> won{0};
  std::vector<std::thread> agents;
  for (int k = 0; k < 4; ++k)
    agents.emplace_back([&] {
      auto mine = host->connect_again(std::chrono::seconds(10));
      if (ddprun::claim_incarnation(*mine, 2, 1)) ++won;
    });
  for (auto& t : agents)
    t.join();
  CHECK(won == 1);
  const auto now = ddprun::current_incarnation(*host, 2);
  CHECK(now.number == 2);
  CHECK_FALSE(now.lost);
  // The winner lost in turn: the next agent races for incarnation 2's place, not 1's.
  CHECK(ddprun::claim_incarnation(*host, 2, 2));
  CHECK(ddprun::current_incarnation(*host, 2).number == 3);
}

TEST_CASE("node 0 counting the node lost first refuses every later rejoin") {
  auto host = serve();
  CHECK(ddprun::count_incarnation_lost(*host, 1, 1));
  CHECK_FALSE(ddprun::claim_incarnation(*host, 1, 1));
  CHECK(ddprun::counted_lost(*host, 1, 1));
  const auto now = ddprun::current_incarnation(*host, 1);
  CHECK(now.number == 1);
  CHECK(now.lost);
}

TEST_CASE("a rejoin that claimed first keeps the node: node 0 waits for the new incarnation") {
  auto host = serve();
  CHECK(ddprun::claim_incarnation(*host, 1, 1));
  CHECK_FALSE(ddprun::count_incarnation_lost(*host, 1, 1));
  CHECK_FALSE(ddprun::counted_lost(*host, 1, 1));
  const auto now = ddprun::current_incarnation(*host, 1);
  CHECK(now.number == 2);
  CHECK_FALSE(now.lost);
}

TEST_CASE("each incarnation's record of its ranks' ends has a key of its own") {
  CHECK(ddprun::ends_record_key(0, 2, 1) != ddprun::ends_record_key(0, 2, 2));
  CHECK(ddprun::ends_record_key(0, 2, 1) != ddprun::ends_record_key(0, 1, 2));
}
