// Whether a shard and a replicate group tile the world (hybrid sharding): the
// check every rank runs on the same gathered records, here on records made up
// for layouts that do and do not tile. tests/dist/test_hybrid_sharded.cpp runs
// it through real groups.
#include <ddp/detail/sharded/hybrid_tiling.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

namespace {

struct group_desc {
  std::string name;
  std::vector<int> members; ///< job ranks, in group order
};

/// Every rank's record, from the groups each rank passes; "" when they tile.
std::string verdict(int world, const std::function<group_desc(int)>& shard_of,
                    const std::function<group_desc(int)>& replicate_of, std::vector<int> world_ranks = {}) {
  if (world_ranks.empty())
    for (int r = 0; r < world; ++r)
      world_ranks.push_back(r);
  std::vector<std::int64_t> all;
  for (int r = 0; r < world; ++r) {
    const auto s = shard_of(r), p = replicate_of(r);
    auto side = [&](const group_desc& g) {
      const auto at = std::find(g.members.begin(), g.members.end(), r);
      const bool member = at != g.members.end();
      return ddp::detail::hybrid_side{member, member ? static_cast<int>(at - g.members.begin()) : -1,
                                      static_cast<int>(g.members.size()), &g.name, &g.members};
    };
    auto rec = ddp::detail::hybrid_record(side(s), side(p), world_ranks);
    REQUIRE(rec.size() == ddp::detail::hybrid_record_fields);
    all.insert(all.end(), rec.begin(), rec.end());
  }
  return ddp::detail::hybrid_tiling_problem(all, world);
}

group_desc block(int r, int s) { // ranks r/s*s .. +s-1
  group_desc g{"block" + std::to_string(r / s), {}};
  for (int k = 0; k < s; ++k)
    g.members.push_back(r / s * s + k);
  return g;
}

group_desc place(int r, int s, int world) { // ranks with r's place in every block
  group_desc g{"place" + std::to_string(r % s), {}};
  for (int k = r % s; k < world; k += s)
    g.members.push_back(k);
  return g;
}

} // namespace

TEST_CASE("blocks and places tile every world, every S x R") {
  for (int w = 1; w <= 8; ++w)
    for (int s = 1; s <= w; ++s)
      if (w % s == 0) {
        CAPTURE(w);
        CAPTURE(s);
        CHECK(verdict(
                  w, [&](int r) { return block(r, s); }, [&](int r) { return place(r, s, w); }) == "");
      }
}

TEST_CASE("nodes whose ranks interleave tile too") {
  // Node 0 holds ranks 0 and 2, node 1 ranks 1 and 3.
  auto node = [](int r) { return group_desc{"node" + std::to_string(r % 2), {r % 2, r % 2 + 2}}; };
  auto across = [](int r) { return group_desc{"local" + std::to_string(r / 2), {r / 2 * 2, r / 2 * 2 + 1}}; };
  CHECK(verdict(4, node, across) == "");
}

TEST_CASE("layouts that do not tile name the ranks") {
  auto places4 = [](int r) { return place(r, 2, 4); };
  // Shard groups of 3 and 1.
  auto uneven = [](int r) { return r < 3 ? group_desc{"three", {0, 1, 2}} : group_desc{"one", {3}}; };
  CHECK(verdict(4, uneven, places4).find("rank 3's shard group has 1 ranks and rank 0's 3") !=
        std::string::npos);
  // The same ranks made by two calls: each group has one rank that passed it.
  auto two_calls = [](int r) {
    return group_desc{(r % 2 ? "call b" : "call a") + std::to_string(r / 2), {r / 2 * 2, r / 2 * 2 + 1}};
  };
  CHECK(verdict(4, two_calls, places4).find("has 2 members, but only 1 ranks passed it") !=
        std::string::npos);
  // The groups hold job rank 1, which the world group passed beside them lacks.
  CHECK(verdict(
            2, [](int r) { return block(r, 2); }, [](int r) { return place(r, 2, 2); }, {0, 5})
            .find("rank 0's shard group holds ranks outside the world") != std::string::npos);
  // Not a member.
  CHECK(verdict(
            2,
            [](int) {
              return group_desc{"g", {0}};
            },
            [](int r) { return place(r, 1, 2); })
            .find("rank 1 is not a member of the shard group it passed") != std::string::npos);
  // The replicate group is the shard group again (made by another call): overlap.
  CHECK(verdict(
            4, [](int r) { return block(r, 2); },
            [](int r) {
              auto g = block(r, 2);
              g.name += " again";
              return g;
            })
            .find("rank 0 and rank 1 share both a shard group and a replicate group") != std::string::npos);
}
