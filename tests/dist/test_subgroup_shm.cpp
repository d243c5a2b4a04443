// Subgroups through the node's shared memory: a subgroup whose members share a
// node maps a segment of its own (under its key prefix) and reduces through
// it, to the same values as over TCP; two subgroups and the job's group in
// flight at once; nested groups; across two nodes, a subgroup of whole nodes
// takes the shm path with its own leaders' mesh, and one whose members lie
// unevenly stays on TCP. Run by ctest through ddprun at world sizes 1..4, and
// across two netns nodes by dist.netns.hybrid.
#include "group.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

using ddp_test::group;

namespace {

bool shm_wanted() {
  const char* v = std::getenv("DDP_SHM");
  return !(v && std::string(v) == "0");
}

/// Member k of `members` contributes (k + 1) * (i % 17) at i: sums stay exact in float.
float value(int job_rank, std::size_t i) {
  return static_cast<float>((job_rank + 1) * static_cast<int>(i % 17));
}

/// all_reduce, reduce_scatter and all_gather of `g` against their closed forms,
/// at sizes that cross the (small) step; `path` names the path for failures.
void check_values(ddp::process_group<ddp::gloo>& g, const char* path) {
  CAPTURE(path);
  const auto members = g.global_ranks();
  const int me = members[static_cast<std::size_t>(g.rank())];
  for (std::size_t n : {std::size_t{7}, std::size_t{3000}, std::size_t{70001}}) {
    CAPTURE(n);
    std::vector<float> v(n), mx(n);
    for (std::size_t i = 0; i < n; ++i)
      v[i] = mx[i] = value(me, i);
    g.all_reduce(v);
    g.all_reduce(mx, ddp::op::max);
    int sum_factor = 0, max_factor = 0;
    for (int m : members) {
      sum_factor += m + 1;
      max_factor = std::max(max_factor, m + 1);
    }
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < n; ++i)
      wrong += v[i] != static_cast<float>(sum_factor * static_cast<int>(i % 17)) ||
               mx[i] != static_cast<float>(max_factor * static_cast<int>(i % 17));
    CHECK(wrong == 0);
  }
  // reduce_scatter then all_gather: block b of the result is the sum of every member's block b.
  const std::size_t block = 5000, s = static_cast<std::size_t>(g.size());
  std::vector<float> in(block * s), mine(block), all(block * s);
  for (std::size_t i = 0; i < in.size(); ++i)
    in[i] = value(me, i);
  g.reduce_scatter(in, mine);
  g.all_gather(mine, all);
  int sum_factor = 0;
  for (int m : members)
    sum_factor += m + 1;
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < all.size(); ++i)
    wrong += all[i] != static_cast<float>(sum_factor * static_cast<int>(i % 17));
  CHECK(wrong == 0);
}

std::int64_t hash_of(const std::string& s) { return static_cast<std::int64_t>(std::hash<std::string>{}(s)); }

} // namespace

TEST_CASE("a subgroup on one node reduces through a segment of its own, to the values TCP gives") {
  auto& pg = group();
  const int r = pg.rank();
  auto g = pg.split(r / 2, r); // pairs of neighbours: one node each under ddprun
  auto& comm = g.communicator();
  const bool one_node = g.topology().nnodes == 1;
  if (one_node) CHECK(comm.shm_active() == (g.size() > 1 && shm_wanted()));
  if (comm.shm_active()) {
    CHECK(comm.shm_segment_name().rfind("/ddp-", 0) == 0);
    CHECK(comm.shm_segment_name() != pg.communicator().shm_segment_name());
  }
  comm.set_shm_step_bytes(4096); // every size below crosses step ends
  const auto block_runs = comm.shm_block_runs();
  check_values(g, comm.shm_active() ? "shm" : "tcp");
  if (comm.shm_active() && one_node) CHECK(comm.shm_block_runs() == block_runs + 2);
  comm.use_shm(false); // the same collectives over TCP, on every member at once
  check_values(g, "tcp");
  comm.use_shm(true);
  comm.set_shm_step_bytes(0);
}

TEST_CASE("two subgroups and the job's group in flight at once, each in its own segment; nested groups") {
  auto& pg = group();
  const int w = pg.size(), r = pg.rank();
  auto odd_even = pg.split(r % 2, r);
  auto pairs = pg.split(r / 2, r);
  auto nested = odd_even.split(0, -odd_even.rank()); // the same members, numbered backwards
  // One segment per group: the same name within a group, another in each other group.
  std::vector<std::int64_t> names{hash_of(odd_even.communicator().shm_segment_name()),
                                  hash_of(pairs.communicator().shm_segment_name()),
                                  hash_of(nested.communicator().shm_segment_name())},
      all(3 * static_cast<std::size_t>(w));
  pg.all_gather(names, all);
  const std::int64_t none = hash_of("");
  for (int p = 0; p < w; ++p) {
    CAPTURE(p);
    auto at = [&](int k) { return all[3 * static_cast<std::size_t>(p) + static_cast<std::size_t>(k)]; };
    if (names[0] != none) CHECK((at(0) == names[0]) == (p % 2 == r % 2));
    if (names[1] != none) CHECK((at(1) == names[1]) == (p / 2 == r / 2));
    if (names[2] != none) CHECK((at(2) == names[2]) == (p % 2 == r % 2));
    if (names[0] != none) CHECK(at(2) != names[0]); // nested: never its parent's segment
  }
  if (pg.topology().nnodes == 1 && shm_wanted()) {
    CHECK(odd_even.communicator().shm_active() == (odd_even.size() > 1));
    CHECK(pairs.communicator().shm_active() == (pairs.size() > 1));
    CHECK(nested.communicator().shm_active() == (nested.size() > 1));
  }
  // Large async all-reduces on four groups, queued before any is waited for, several rounds.
  int sum_odd_even = 0, sum_pairs = 0;
  for (int m : odd_even.global_ranks())
    sum_odd_even += m;
  for (int m : pairs.global_ranks())
    sum_pairs += m;
  for (int round = 0; round < 5; ++round) {
    CAPTURE(round);
    std::vector<float> a(300000, 1.0f), b(200000, static_cast<float>(r)), c(100000, static_cast<float>(r)),
        d(50000, 2.0f);
    auto wa = pg.all_reduce_async(a);
    auto wb = odd_even.all_reduce_async(b);
    auto wc = pairs.all_reduce_async(c);
    auto wd = nested.all_reduce_async(d);
    wd.wait();
    wc.wait();
    wb.wait();
    wa.wait();
    CHECK(a[123] == static_cast<float>(w));
    CHECK(b[199999] == static_cast<float>(sum_odd_even));
    CHECK(c[77] == static_cast<float>(sum_pairs));
    CHECK(d[0] == 2.0f * static_cast<float>(nested.size()));
  }
}

TEST_CASE("across two nodes: a subgroup of whole nodes takes shm, an uneven one stays on TCP") {
  auto& pg = group();
  const auto& t = pg.topology();
  if (t.nnodes != 2 || t.local_world_size != 2 || pg.size() != 4 || !shm_wanted()) return;
  // Nodes listed backwards: group ranks 0, 1 on node 1, then 2, 3 on node 0; its leaders' own mesh.
  auto backwards = pg.new_group({3, 2, 1, 0});
  CHECK(backwards.topology().nnodes == 2);
  CHECK(backwards.communicator().shm_active());
  backwards.communicator().set_shm_step_bytes(4096);
  check_values(backwards, "shm across nodes");
  backwards.communicator().set_shm_step_bytes(0);
  // One member on node 0, two on node 1: no layout of whole nodes. DDP_DEBUG=INFO says why.
  auto uneven = pg.new_group({0, 2, 3});
  if (uneven.is_member()) {
    CHECK_FALSE(uneven.communicator().shm_active());
    check_values(uneven, "tcp, uneven");
  }
  // Interleaved: each node holds two members, but not a contiguous run of ranks.
  auto interleaved = pg.new_group({0, 2, 1, 3});
  CHECK_FALSE(interleaved.communicator().shm_active());
  check_values(interleaved, "tcp, interleaved");
}
