// Hybrid sharding (sharded_data_parallel over a shard group and a replicate
// group) at world sizes 1..4, every layout S x R = W, the groups made as
// "nodes" of S consecutive ranks: against distributed_data_parallel with the
// same optimizer written out on whole parameters, and against flat sharding.
// Then checkpoints across hybrid and flat, and layouts that do not tile the
// world: one error on every rank, and the job's group usable afterwards.
#include "../support/mlp.hpp"
#include "../support/spawn.hpp"
#include "../support/whole_optimizer.hpp"
#include "group.hpp"

#include <ddp/checkpoint.hpp>
#include <ddp/hybrid_groups.hpp>
#include <ddp/sharded_data_parallel.hpp>

#include <doctest/doctest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <regex>
#include <sstream>
#include <string>

using ddp_test::group;
using ddp_test::mlp;
using ddp_test::whole_optimizer;
using gloo_group = ddp::process_group<ddp::gloo>;

namespace {

const std::vector<int> dims{6, 16, 12, 3}; // 3-element biases: buckets smaller than S = 4
constexpr int per_rank = 5;
constexpr int steps = 8;

/// A process group held in place (groups do not move): made by `make`.
struct held {
  gloo_group g;
  template <class F> explicit held(F&& make) : g(make()) {}
};

/// new_group over each of `sets` on every rank, in order; `out` holds this rank's.
void make_mine(gloo_group& pg, const std::vector<std::vector<int>>& sets, std::optional<held>& out) {
  for (auto& set : sets) {
    if (std::find(set.begin(), set.end(), pg.rank()) != set.end())
      out.emplace([&] { return pg.new_group(set); });
    else
      (void)pg.new_group(set); // every rank takes part in every new_group
  }
}

/// "Nodes" of S consecutive ranks (the shard groups) and the ranks with the
/// same place on each (the replicate groups), by explicit rank lists.
struct explicit_layout {
  std::optional<held> shard, replicate;
  explicit_layout(gloo_group& pg, int S) {
    const int R = pg.size() / S;
    std::vector<std::vector<int>> blocks(static_cast<std::size_t>(R)), places(static_cast<std::size_t>(S));
    for (int r = 0; r < pg.size(); ++r) {
      blocks[static_cast<std::size_t>(r / S)].push_back(r);
      places[static_cast<std::size_t>(r % S)].push_back(r);
    }
    make_mine(pg, blocks, shard);
    make_mine(pg, places, replicate);
  }
};

std::vector<int> divisors(int w) {
  std::vector<int> d;
  for (int s = 1; s <= w; ++s)
    if (w % s == 0) d.push_back(s);
  return d;
}

struct scenario {
  bool adam = true;
  bool unused = false;  ///< some ranks leave fc2.bias unused on some steps
  bool no_sync = false; ///< two micro-batches per step, the first under no_sync()
};

struct differences {
  double vs_ddp = 0, vs_flat = 0;
};

/// Trains the same MLP with DDP + whole optimizer, flat sharding and hybrid
/// sharding over shard groups of S ranks; the relative differences of the
/// hybrid model's parameters on this rank.
template <class S, class Bucketing = ddp::bucketing::size_capped<>, class Reduction = ddp::reduction::mean>
differences compare(gloo_group& shard, gloo_group& replicate, scenario sc) {
  auto& pg = group();
  const int W = pg.size(), r = pg.rank();
  const unsigned seed =
      r == 0 ? 3u : 3u + 77u * static_cast<unsigned>(r); // the constructors broadcast rank 0's
  mlp<S> a(dims, seed, false), b(dims, seed, false), c(dims, seed, false);
  ddp::distributed_data_parallel<mlp<S>, ddp::gloo, Bucketing, Reduction> dp(a, pg);
  ddp::sharded_data_parallel<mlp<S>, ddp::gloo, Bucketing, Reduction> flat(b, pg);
  ddp::sharded_data_parallel<mlp<S>, ddp::gloo, Bucketing, Reduction> hyb(c, pg, shard, replicate);
  CHECK(hyb.hybrid());
  CHECK(&hyb.shard_group() == &shard);
  whole_optimizer<S> ref{sc.adam};
  ref.a = {.lr = 1e-2, .weight_decay = 1e-3};
  ref.g = {.lr = 0.05, .momentum = 0.9, .weight_decay = 1e-3, .nesterov = true};
  auto run = [&](auto& o1, auto& o2) {
    for (int step = 0; step < steps; ++step) {
      const int micro = sc.no_sync ? 2 : 1;
      a.zero_grad();
      b.zero_grad();
      c.zero_grad();
      for (int k = 0; k < micro; ++k) {
        auto [x, y] =
            ddp_test::make_batch<S>(dims.front(), dims.back(), W * per_rank,
                                    50u + 10u * static_cast<unsigned>(step) + static_cast<unsigned>(k));
        typename mlp<S>::mat xs = x.middleCols(r * per_rank, per_rank),
                             ys = y.middleCols(r * per_rank, per_rank);
        auto one = [&](auto& par, mlp<S>& net) {
          net.train_step(xs, ys);
          if (sc.unused && (step + r) % 3 == 0) par.mark_unused(std::size_t{3}); // fc2.bias
        };
        if (k + 1 < micro) {
          auto g1 = dp.no_sync();
          auto g2 = flat.no_sync();
          auto g3 = hyb.no_sync();
          one(dp, a);
          one(flat, b);
          one(hyb, c);
        } else {
          one(dp, a);
          one(flat, b);
          one(hyb, c);
        }
      }
      dp.synchronize();
      ref.step(a);
      flat.synchronize();
      o1.step();
      hyb.synchronize();
      o2.step();
    }
  };
  if (sc.adam) {
    ddp::optim::adam o1(flat, ref.a), o2(hyb, ref.a);
    run(o1, o2);
  } else {
    ddp::optim::sgd o1(flat, ref.g), o2(hyb, ref.g);
    run(o1, o2);
  }
  return {ddp_test::relative_difference(c.flat(), a.flat()),
          ddp_test::relative_difference(c.flat(), b.flat())};
}

/// compare() over "nodes" of `shard_size` consecutive ranks, by explicit rank lists.
template <class S, class Bucketing = ddp::bucketing::size_capped<>, class Reduction = ddp::reduction::mean>
differences compare(int shard_size, scenario sc) {
  explicit_layout layout(group(), shard_size);
  return compare<S, Bucketing, Reduction>(layout.shard->g, layout.replicate->g, sc);
}

/// Runs `f` and returns its ddp::error's message ("" if it did not throw).
template <class F> std::string refusal(F&& f) {
  try {
    f();
  } catch (const ddp::error& e) { return e.what(); }
  return {};
}

/// Every rank was refused with `expected` in its message, and the job's group still works.
void refused_everywhere(const std::string& message, const std::string& expected) {
  INFO("message on rank " << group().rank() << ": " << message);
  CHECK(message.find("do not tile the world") != std::string::npos);
  CHECK(message.find(expected) != std::string::npos);
  std::vector<int> ok{message.find(expected) != std::string::npos ? 1 : 0};
  group().all_reduce(ok, ddp::op::min); // and the group is not stuck
  CHECK(ok[0] == 1);
}

} // namespace

TEST_CASE("hybrid equals DDP + whole optimizer and flat sharding, every S x R = W") {
  for (int s : divisors(group().size())) {
    CAPTURE(s);
    auto d = compare<float>(s, {.adam = true});
    CHECK(d.vs_ddp < 1e-5);
    CHECK(d.vs_flat < 1e-5);
    d = compare<float, ddp::bucketing::per_tensor>(s, {.adam = false});
    CHECK(d.vs_ddp < 1e-5);
    CHECK(d.vs_flat < 1e-5);
    d = compare<double, ddp::bucketing::single_buffer>(s, {.adam = true});
    CHECK(d.vs_ddp < 1e-12);
    CHECK(d.vs_flat < 1e-12);
  }
}

TEST_CASE("hybrid with unused parameters, no_sync, sum and fp16-compressed mean") {
  for (int s : divisors(group().size())) {
    CAPTURE(s);
    CHECK(compare<float>(s, {.adam = true, .unused = true}).vs_ddp < 1e-5);
    CHECK(compare<float, ddp::bucketing::per_tensor>(s, {.adam = false, .unused = true, .no_sync = true})
              .vs_ddp < 1e-5);
    CHECK(compare<float, ddp::bucketing::size_capped<>, ddp::reduction::sum>(s, {.adam = false}).vs_ddp <
          1e-5);
    CHECK(compare<float, ddp::bucketing::size_capped<>, ddp::reduction::fp16_compressed_mean>(s,
                                                                                              {.adam = false})
              .vs_ddp < 1e-2);
  }
}

TEST_CASE("make_hybrid_groups: by shard size, and from the topology (one node: flat)") {
  auto& pg = group();
  const int W = pg.size(), r = pg.rank();
  for (int s : divisors(W)) {
    CAPTURE(s);
    auto groups = ddp::make_hybrid_groups(pg, s);
    CHECK(groups.shard.size() == s);
    CHECK(groups.replicate.size() == W / s);
    CHECK(groups.shard.rank() == r % s);
    CHECK(groups.replicate.rank() == r / s);
    CHECK(groups.shard.global_ranks().front() == r / s * s);
  }
  const std::string odd = refusal([&] { (void)ddp::make_hybrid_groups(pg, W + 1); });
  CHECK(odd.find("does not divide the group's " + std::to_string(W) + " ranks") != std::string::npos);
}

// Also what tests/netns/two_nodes.sh runs on 2 nodes x 2 ranks; on loopback, one node.
TEST_CASE("hybrid from the topology: shard = the node, replicate = the same local rank on every node") {
  auto& pg = group();
  const auto& t = pg.topology();
  auto groups = ddp::make_hybrid_groups(pg);
  CHECK(groups.shard.size() == t.local_world_size);
  CHECK(groups.shard.rank() == t.local_rank);
  CHECK(groups.replicate.size() == t.nnodes);
  CHECK(groups.replicate.rank() == t.node_rank);
  // A subgroup collective across the nodes: the job ranks of this local rank on every node.
  std::vector<std::int64_t> sum{pg.rank()};
  groups.replicate.all_reduce(sum);
  std::int64_t expected = 0;
  for (int n = 0; n < t.nnodes; ++n)
    expected += n * t.local_world_size + t.local_rank; // ddprun numbers ranks node by node
  CHECK(sum[0] == expected);
  auto d = compare<float>(groups.shard, groups.replicate, {.adam = true});
  CHECK(d.vs_ddp < 1e-5);
  CHECK(d.vs_flat < 1e-5);
  d = compare<float, ddp::bucketing::per_tensor>(groups.shard, groups.replicate, {.adam = false});
  CHECK(d.vs_ddp < 1e-5);
  CHECK(d.vs_flat < 1e-5);
}

TEST_CASE("clip_grad_norm under hybrid clips the whole averaged gradient") {
  auto& pg = group();
  const int W = pg.size(), r = pg.rank();
  auto groups = ddp::make_hybrid_groups(pg, W % 2 == 0 ? W / 2 : 1);
  mlp<float> a(dims, 6, false), b(dims, 6, false);
  ddp::distributed_data_parallel dp(a, pg);
  ddp::sharded_data_parallel hyb(b, pg, groups);
  ddp::optim::sgd opt(hyb, {.lr = 0.1});
  for (int step = 0; step < 3; ++step) {
    auto [x, y] = ddp_test::make_batch<float>(dims.front(), dims.back(), W * per_rank,
                                              700u + static_cast<unsigned>(step));
    mlp<float>::mat xs = x.middleCols(r * per_rank, per_rank), ys = y.middleCols(r * per_rank, per_rank);
    a.zero_grad();
    a.train_step(xs, ys);
    dp.synchronize();
    double sq = 0;
    a.for_each_parameter([&](auto&&, auto&, auto& g) { sq += static_cast<double>(g.squaredNorm()); });
    const double max_norm = 0.05, factor = max_norm / (std::sqrt(sq) + 1e-6);
    a.for_each_parameter([&](auto&&, auto& v, auto& g) {
      if (factor < 1) g *= static_cast<float>(factor);
      v -= 0.1f * mlp<float>::mat(g);
    });
    b.zero_grad();
    b.train_step(xs, ys);
    hyb.synchronize();
    CHECK(hyb.clip_grad_norm(max_norm) == doctest::Approx(std::sqrt(sq)).epsilon(1e-4));
    opt.step();
  }
  CHECK(ddp_test::relative_difference(b.flat(), a.flat()) < 1e-5);
}

TEST_CASE("join under hybrid: a rank out of data still reduces, averages and gathers its shard") {
  auto& pg = group();
  const int W = pg.size(), r = pg.rank();
  auto groups = ddp::make_hybrid_groups(pg, W % 2 == 0 ? W / 2 : 1); // replicas of joined and training ranks
  // Rank r trains 3 + r steps. DDP's last rank and every hybrid rank end with the same model.
  auto batch = [&](int step) {
    auto [x, y] = ddp_test::make_batch<float>(dims.front(), dims.back(), W * per_rank,
                                              300u + static_cast<unsigned>(step));
    return std::pair<mlp<float>::mat, mlp<float>::mat>(x.middleCols(r * per_rank, per_rank),
                                                       y.middleCols(r * per_rank, per_rank));
  };
  whole_optimizer<float> ref{false};
  ref.g = {.lr = 0.05};
  mlp<float> a(dims, 4, false), b(dims, 4, false);
  { // One job after the other: a joined rank shadows only its own kind of step.
    ddp::distributed_data_parallel dp(a, pg, {.uneven_inputs = true});
    for (int step = 0; step < 3 + r; ++step) {
      auto [xs, ys] = batch(step);
      a.zero_grad();
      a.train_step(xs, ys);
      dp.synchronize();
      ref.step(a);
    }
    dp.join();
  }
  ddp::sharded_data_parallel hyb(b, pg, groups, {.uneven_inputs = true});
  ddp::optim::sgd opt(hyb, ref.g);
  for (int step = 0; step < 3 + r; ++step) {
    auto [xs, ys] = batch(step);
    b.zero_grad();
    b.train_step(xs, ys);
    hyb.synchronize();
    opt.step();
  }
  hyb.join(opt);
  auto last = a.flat(); // the rank that trained longest holds DDP's final model
  std::vector<double> from_last(last.size());
  if (r == W - 1) from_last = last;
  pg.broadcast(from_last, W - 1);
  CHECK(ddp_test::relative_difference(b.flat(), from_last) < 1e-5);
}

TEST_CASE("a checkpoint saved under hybrid resumes under hybrid exactly, and under flat sharding") {
  auto& pg = group();
  const int W = pg.size(), r = pg.rank();
  const std::string path = "/tmp/ddp-test-hybrid-" + std::to_string(W) + "-" + std::to_string(::getppid());
  auto groups = ddp::make_hybrid_groups(pg, W % 2 == 0 ? W / 2 : 1);
  auto train = [&](mlp<float>& net, auto& sdp, auto& opt, int from, int to) {
    for (int step = from; step < to; ++step) {
      auto [x, y] = ddp_test::make_batch<float>(dims.front(), dims.back(), W * per_rank,
                                                900u + static_cast<unsigned>(step));
      net.zero_grad();
      net.train_step(x.middleCols(r * per_rank, per_rank), y.middleCols(r * per_rank, per_rank));
      sdp.synchronize();
      opt.step();
    }
  };
  mlp<float> straight(dims, 5, false);
  ddp::sharded_data_parallel s1(straight, pg, groups);
  ddp::optim::adam o1(s1, {.lr = 1e-2});
  train(straight, s1, o1, 0, 4);
  ddp::save_checkpoint(path, s1, o1, {.step = 4});
  train(straight, s1, o1, 4, 8);

  mlp<float> again(dims, 99, false), as_flat(dims, 98, false);
  ddp::sharded_data_parallel s2(again, pg, groups);
  ddp::optim::adam o2(s2, {.lr = 1e-2});
  CHECK(ddp::load_checkpoint(path, s2, o2).step == 4);
  CHECK(o2.steps() == 4);
  train(again, s2, o2, 4, 8);
  CHECK(again.flat() == straight.flat());

  ddp::sharded_data_parallel s3(as_flat, pg);
  ddp::optim::adam o3(s3, {.lr = 1e-2});
  ddp::load_checkpoint(path, s3, o3);
  train(as_flat, s3, o3, 4, 8);
  CHECK(ddp_test::relative_difference(as_flat.flat(), straight.flat()) < 1e-5);
  pg.barrier();
  if (r == 0) std::remove(path.c_str());
}

TEST_CASE("groups that do not tile the world: one error on every rank, no hang") {
  auto& pg = group();
  const int W = pg.size(), r = pg.rank();
  mlp<float> net(dims, 5, false);
  if (W >= 2) { // the same ranks for both groups: every pair of ranks shares both
    auto a = pg.split(0, r);
    auto b = pg.split(0, r);
    refused_everywhere(refusal([&] { ddp::sharded_data_parallel s(net, pg, a, b); }),
                       "ranks make " + std::to_string(W * W) + " places, not the world's " +
                           std::to_string(W));
  }
  if (W == 4) {
    auto halves = pg.split(r / 2, r);
    auto halves_again = pg.split(r / 2, r);
    auto all = pg.split(0, r);
    auto crossed = pg.split(r == 0 || r == 3 ? 0 : 1, r); // {0, 3} and {1, 2}: different shard ranks
    auto first_two = pg.new_group({0, 1});                // ranks 2 and 3 are not in it
    auto places = pg.split(r % 2, r);
    refused_everywhere(refusal([&] { ddp::sharded_data_parallel s(net, pg, halves, halves_again); }),
                       "rank 0 and rank 1 share both a shard group and a replicate group");
    refused_everywhere(refusal([&] { ddp::sharded_data_parallel s(net, pg, halves, all); }),
                       "shard groups of 2 ranks and replicate groups of 4 ranks make 8 places");
    refused_everywhere(
        refusal([&] { ddp::sharded_data_parallel s(net, pg, halves, crossed); }),
        "rank 0 and rank 3 share a replicate group but are ranks 0 and 1 of their shard groups");
    refused_everywhere(
        refusal([&] { ddp::sharded_data_parallel s(net, pg, r < 2 ? halves : first_two, places); }),
        "rank 2 is not a member of the shard group it passed");
    ddp::sharded_data_parallel fine(net, pg, halves, places); // the right pair still works
    CHECK(fine.shard_elements() > 0);
  }
  pg.barrier();
}

namespace {
/// A fresh group whose store rank 0 serves (tcp://): a case that fails its groups needs its own,
/// and a store, through which the ranks that only see a connection close learn who failed.
gloo_group fresh_tcp_group() { return ddp_test::fresh_tcp_group(std::chrono::seconds(30)); }

/// The job rank for rank `n` as `text` numbers it: every error, a subgroup's included, numbers
/// ranks in the job (docs/api.md), so this is n; kept as the one place that says so.
int job_rank_in(const std::string& /*text*/, int n) { return n; }

/// The job rank an error names.
int job_rank_named(const ddp::error& e) { return job_rank_in(e.what(), e.rank()); }

/// The job rank a step check's text blames ("rank N's gradient", "Rank N counted"), or
/// `self` when it blames the rank that wrote it ("this rank produced it"); -1: none.
int blamed_in(const std::string& text, int self) {
  std::smatch m;
  if (text.find("this rank produced it") != std::string::npos) return self;
  if (std::regex_search(text, m, std::regex("rank ([0-9]+)'s gradient of parameter")) ||
      std::regex_search(text, m, std::regex("Rank ([0-9]+) counted")))
    return job_rank_in(text, std::stoi(m[1].str()));
  return -1;
}
} // namespace

namespace {
/// How many failures job rank `rank` has noted for the launcher (DDP_FAILURE_FILE, set by
/// ddprun: "<ns> <rank> <reason>" lines); -1 without the file.
int failure_notes_of(int rank) {
  const char* path = std::getenv("DDP_FAILURE_FILE");
  if (!path || !*path) return -1;
  std::ifstream in(path);
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    long long ns = 0;
    int r = -1;
    if (fields >> ns >> r && r == rank) ++n;
  }
  return n;
}

/// What the failing rank's check says, on whichever rank reports it.
bool names_the_check(const std::string& what, bool nan) {
  return nan ? what.find("holds a NaN or Inf") != std::string::npos &&
                   what.find("'fc1.weight'") != std::string::npos
             : what.find("the ranks are at different steps") != std::string::npos &&
                   what.find("counted 1 synchronize() call(s) more") != std::string::npos;
}
} // namespace

TEST_CASE("under hybrid, a NaN (check_finite) or a one-sided no_sync() is an error on every rank, fast") {
  // Every layout, shard groups of one rank included (no round of their own in the reduce-scatter:
  // the replicate all-reduce carries the step check), and S x R with both above one (ranks of the
  // other shard group wait in the replicate all-reduce: the failing rank aborts it).
  auto& ctl = group();
  const int W = ctl.size();
  if (W == 1) return;
  const int failing = W - 1;
  for (int S : divisors(W)) {
    for (bool nan : {true, false}) {
      CAPTURE(S);
      CAPTURE(nan);
      {
        auto pg = fresh_tcp_group();
        auto groups = ddp::make_hybrid_groups(pg, S);
        mlp<float> m(dims, 6, false);
        ddp::sharded_data_parallel hyb(m, pg, groups, {.check_finite = true});
        const int r = pg.rank();
        auto step = [&](unsigned seed) {
          auto [x, y] = ddp_test::make_batch<float>(dims.front(), dims.back(), W * per_rank, seed);
          mlp<float>::mat xs = x.middleCols(r * per_rank, per_rank),
                          ys = y.middleCols(r * per_rank, per_rank);
          m.zero_grad();
          m.train_step(xs, ys);
        };
        step(900u);
        hyb.synchronize();          // one step together
        if (!nan && r == failing) { // the last rank accumulates alone: it is a step ahead
          auto guard = hyb.no_sync();
          step(901u);
          hyb.synchronize();
        }
        step(902u);
        if (nan && r == failing)
          m.for_each_parameter([](auto&& name, auto&, auto& g) {
            if (std::string(name) == "fc1.weight") g(0, 0) = std::numeric_limits<float>::quiet_NaN();
          });
        // The launcher's failure notes before the failing step, every rank's (the control group
        // lines the reads up). Under ctest, ddprun sets DDP_FAILURE_FILE: the check must not
        // vanish silently without it.
        REQUIRE_MESSAGE(std::getenv("DDP_FAILURE_FILE"), "run under ddprun: DDP_FAILURE_FILE is unset");
        std::vector<int> notes_before(static_cast<std::size_t>(W));
        for (int q = 0; q < W; ++q)
          notes_before[static_cast<std::size_t>(q)] = failure_notes_of(q);
        ctl.barrier();
        const auto t0 = std::chrono::steady_clock::now();
        std::optional<ddp::error> caught;
        try {
          hyb.synchronize();
        } catch (const ddp::error& e) { caught = e; }
        CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10)); // not a timeout
        REQUIRE(caught);
        // One failure, noted once for the launcher (and reported once to the store), though it
        // fails three groups: the shard group, the replicate group and pg. None when pg had
        // already heard of another rank's failure; at least one rank notes it. Every rank has
        // thrown, so written its note, once past the barrier.
        ctl.barrier();
        std::vector<int> noted(static_cast<std::size_t>(W));
        int noted_in_all = 0;
        for (int q = 0; q < W; ++q) {
          CAPTURE(q);
          noted[static_cast<std::size_t>(q)] =
              failure_notes_of(q) - notes_before[static_cast<std::size_t>(q)];
          CHECK(noted[static_cast<std::size_t>(q)] >= 0);
          CHECK(noted[static_cast<std::size_t>(q)] <= 1);
          noted_in_all += noted[static_cast<std::size_t>(q)];
        }
        CHECK(noted_in_all >= 1);
        const ddp::error& e = *caught;
        const std::string what = e.what();
        CAPTURE(what);
        CAPTURE(e.rank());
        const auto expected_kind = nan ? ddp::error_kind::data : ddp::error_kind::mismatch;
        // Who runs a step check with the failing rank: its shard group (its reduce-scatter's
        // header), or everyone when shard groups have one rank (the replicate all-reduce's).
        const bool checks_with_failing = r / S == failing / S || S == 1;
        std::smatch heard;
        if (e.kind() == expected_kind) {
          // The check itself, and the failing rank: e.rank() numbers the ranks of the group the
          // message names, or of the job (the failing rank's own error names no group).
          CHECK(checks_with_failing);
          CHECK(job_rank_named(e) == failing);
          CHECK(names_the_check(what, nan));
          if (r == failing && nan) CHECK(what.find("this rank produced it") != std::string::npos);
        } else if (std::regex_search(what, heard, std::regex("rank ([0-9]+) failed: "))) {
          // The store's report of a rank that failed first reached this one before its own check
          // (a slow rank under load) or before the closed connection, in its collective or
          // before it ("rank N failed: ..."): a lost peer, named, with that rank's error, and so
          // the check, in the message.
          const int reporter = std::stoi(heard[1].str());
          const std::string reported = heard.suffix().str(); // the reporter's own error
          CAPTURE(reported);
          CHECK(e.kind() == ddp::error_kind::peer_lost);
          CHECK(reporter != r);
          CHECK(e.rank() == reporter);
          CHECK(names_the_check(reported, nan));
          // The reporter ran the check with the failing rank, which its error blames.
          CHECK((reporter / S == failing / S || S == 1));
          CHECK(blamed_in(reported, reporter) == failing);
          // Its report is the launcher's note of the failure too.
          REQUIRE(reporter >= 0);
          REQUIRE(reporter < W);
          CHECK(noted[static_cast<std::size_t>(reporter)] == 1);
        } else {
          // The other shard groups' ranks wait in a replicate all-reduce with a rank of the
          // failing shard group, which aborts it: without the store's report, a peer of that
          // replicate group closed its connection.
          CHECK_FALSE(checks_with_failing);
          CHECK(e.kind() == ddp::error_kind::peer_lost);
          CHECK(what.find("a peer closed its connection") != std::string::npos);
          CHECK(what.find(groups.replicate.name()) != std::string::npos);
        }
        ctl.barrier();
      }
    }
  }
}
