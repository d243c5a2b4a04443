// sharded_data_parallel (ZeRO-1) with ddp::optim::adam and sgd at world sizes
// 1..4, against distributed_data_parallel with the same optimizer written
// out on whole parameters.
#include "../support/mlp.hpp"
#include "../support/whole_optimizer.hpp"
#include "group.hpp"

#include <ddp/sharded_data_parallel.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <fstream>

using ddp_test::group;
using ddp_test::mlp;
using ddp_test::whole_optimizer;

namespace {

const std::vector<int> dims{6, 16, 12, 3}; // 3-element biases: buckets smaller than W = 4
constexpr int per_rank = 5;
constexpr int steps = 20;

struct scenario {
  bool adam = true;
  bool unused = false;  ///< some ranks leave fc2.bias unused on some steps
  bool no_sync = false; ///< two micro-batches per step, the first under no_sync()
};

/// Trains the same MLP with DDP + whole optimizer and with sharded + ddp::optim;
/// returns the relative difference of the parameters on this rank.
template <class S, class Bucketing = ddp::bucketing::size_capped<>, class Reduction = ddp::reduction::mean>
double compare(scenario sc, std::size_t* state_bytes = nullptr, std::size_t* shard = nullptr) {
  auto& pg = group();
  const int R = pg.size(), r = pg.rank();
  const unsigned seed =
      r == 0 ? 3u : 3u + 77u * static_cast<unsigned>(r); // the constructors broadcast rank 0's
  mlp<S> a(dims, seed, false), b(dims, seed, false);
  ddp::distributed_data_parallel<mlp<S>, ddp::gloo, Bucketing, Reduction> dp(a, pg);
  ddp::sharded_data_parallel<mlp<S>, ddp::gloo, Bucketing, Reduction> sdp(b, pg);
  whole_optimizer<S> ref{sc.adam};
  ref.a = {.lr = 1e-2, .weight_decay = 1e-3};
  ref.g = {.lr = 0.05, .momentum = 0.9, .weight_decay = 1e-3, .nesterov = true};
  auto run = [&](auto& opt) {
    for (int step = 0; step < steps; ++step) {
      const int micro = sc.no_sync ? 2 : 1;
      a.zero_grad();
      b.zero_grad();
      for (int k = 0; k < micro; ++k) {
        auto [x, y] =
            ddp_test::make_batch<S>(dims.front(), dims.back(), R * per_rank,
                                    50u + 10u * static_cast<unsigned>(step) + static_cast<unsigned>(k));
        typename mlp<S>::mat xs = x.middleCols(r * per_rank, per_rank),
                             ys = y.middleCols(r * per_rank, per_rank);
        auto one = [&](auto& par, mlp<S>& net) {
          net.train_step(xs, ys);
          if (sc.unused && (step + r) % 3 == 0) par.mark_unused(std::size_t{3}); // fc2.bias
        };
        if (k + 1 < micro) {
          auto g1 = dp.no_sync();
          auto g2 = sdp.no_sync();
          one(dp, a);
          one(sdp, b);
        } else {
          one(dp, a);
          one(sdp, b);
        }
      }
      dp.synchronize();
      ref.step(a);
      sdp.synchronize();
      opt.step();
    }
    if (state_bytes) *state_bytes = opt.state_bytes();
  };
  if (sc.adam) {
    ddp::optim::adam opt(sdp, ref.a);
    run(opt);
  } else {
    ddp::optim::sgd opt(sdp, ref.g);
    run(opt);
  }
  if (shard) *shard = sdp.shard_elements();
  return ddp_test::relative_difference(b.flat(), a.flat());
}

} // namespace

TEST_CASE("adam on shards equals adam on whole parameters: one bucket split across ranks, per tensor") {
  CHECK(compare<float>({.adam = true}) < 1e-5);
  CHECK(compare<float, ddp::bucketing::per_tensor>({.adam = true}) < 1e-5);
  CHECK(compare<double, ddp::bucketing::single_buffer>({.adam = true}) < 1e-12);
}

TEST_CASE("sgd with Nesterov momentum and weight decay on shards") {
  CHECK(compare<float>({.adam = false}) < 1e-5);
  CHECK(compare<float, ddp::bucketing::per_tensor>({.adam = false}) < 1e-5);
}

TEST_CASE("unused parameters and no_sync") {
  CHECK(compare<float>({.adam = true, .unused = true}) < 1e-5);
  CHECK(compare<float, ddp::bucketing::per_tensor>({.adam = false, .unused = true, .no_sync = true}) < 1e-5);
}

TEST_CASE("sum and fp16-compressed mean as with distributed_data_parallel") {
  CHECK(compare<float, ddp::bucketing::size_capped<>, ddp::reduction::sum>({.adam = false}) < 1e-5);
  CHECK(compare<float, ddp::bucketing::size_capped<>, ddp::reduction::fp16_compressed_mean>({.adam = false}) <
        1e-2);
}

TEST_CASE("optimizer state is 1/W of the whole, within one element per bucket") {
  auto& pg = group();
  std::size_t bytes = 0, shard = 0;
  compare<float>({.adam = true}, &bytes, &shard);
  CHECK(bytes == 2 * shard * sizeof(float));
  std::size_t total = 0;
  mlp<float> probe(dims, 1, false);
  probe.for_each_parameter([&](auto&&, auto& v, auto&) { total += static_cast<std::size_t>(v.size()); });
  std::vector<std::int64_t> all{static_cast<std::int64_t>(shard)};
  pg.all_reduce(all);
  CHECK(all[0] == static_cast<std::int64_t>(total));
  // One bucket (size_capped holds this small model in one): shards differ by at most one element.
  std::vector<std::int64_t> lo{static_cast<std::int64_t>(shard)}, hi{static_cast<std::int64_t>(shard)};
  pg.all_reduce(lo, ddp::op::min);
  pg.all_reduce(hi, ddp::op::max);
  CHECK(hi[0] - lo[0] <= 1);
}

TEST_CASE("save and load: a job resumed from its shards goes on exactly as an unbroken one") {
  auto& pg = group();
  const std::string path = "/tmp/ddp-test-sharded-" + std::to_string(pg.size()) + "-" +
                           std::to_string(::getppid()); // the same on every rank (ddprun's pid)
  auto train = [&](mlp<float>& net, auto& sdp, auto& opt, int from, int to) {
    for (int step = from; step < to; ++step) {
      auto [x, y] = ddp_test::make_batch<float>(dims.front(), dims.back(), pg.size() * per_rank,
                                                900u + static_cast<unsigned>(step));
      net.zero_grad();
      net.train_step(x.middleCols(pg.rank() * per_rank, per_rank),
                     y.middleCols(pg.rank() * per_rank, per_rank));
      sdp.synchronize();
      opt.step();
    }
  };
  mlp<float> straight(dims, 5, false);
  ddp::sharded_data_parallel s1(straight, pg);
  ddp::optim::adam o1(s1, {.lr = 1e-2});
  train(straight, s1, o1, 0, 4);
  o1.save(path);
  const auto at_save = straight.flat();
  train(straight, s1, o1, 4, 8);

  mlp<float> resumed(dims, 99, false);
  {
    std::size_t i = 0; // the model's own checkpoint: its parameters at step 4
    resumed.for_each_parameter([&](auto&&, auto& v, auto&) {
      for (Eigen::Index k = 0; k < v.size(); ++k)
        v.data()[k] = static_cast<float>(at_save[i++]);
    });
  }
  ddp::sharded_data_parallel s2(resumed, pg);
  ddp::optim::adam o2(s2, {.lr = 1e-2});
  o2.load(path);
  CHECK(o2.steps() == 4);
  train(resumed, s2, o2, 4, 8);
  CHECK(resumed.flat() == straight.flat());

  // Another world size: the file says so, and how to resume.
  const std::string mine = path + ".rank" + std::to_string(pg.rank());
  {
    std::fstream f(mine, std::ios::in | std::ios::out | std::ios::binary);
    const std::uint32_t other = static_cast<std::uint32_t>(pg.size() + 1);
    f.seekp(8);
    f.write(reinterpret_cast<const char*>(&other), sizeof other);
  }
  const std::string other_world = "was saved by a job of " + std::to_string(pg.size() + 1) + " ranks";
  CHECK_THROWS_WITH_AS(o2.load(path), doctest::Contains(other_world.c_str()), ddp::error);
  std::remove(mine.c_str());
  const std::string missing = mine + ": cannot open it";
  CHECK_THROWS_WITH_AS(o2.load(path), doctest::Contains(missing.c_str()), ddp::error);
}

TEST_CASE("a step before synchronize() is refused") {
  mlp<float> net(dims, 5, false);
  ddp::sharded_data_parallel sdp(net, group());
  ddp::optim::sgd opt(sdp, {.lr = 0.1});
  CHECK_THROWS_WITH_AS(opt.step(), doctest::Contains("before synchronize()"), ddp::error);
}

TEST_CASE("join: a rank out of data still updates and sends its shard") {
  auto& pg = group();
  const int R = pg.size(), r = pg.rank();
  // Rank r trains 3 + r steps. DDP's last rank and every sharded rank end with the same model.
  auto batch = [&](int step) {
    auto [x, y] = ddp_test::make_batch<float>(dims.front(), dims.back(), R * per_rank,
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
  ddp::sharded_data_parallel sdp(b, pg, {.uneven_inputs = true});
  ddp::optim::sgd opt(sdp, ref.g);
  for (int step = 0; step < 3 + r; ++step) {
    auto [xs, ys] = batch(step);
    b.zero_grad();
    b.train_step(xs, ys);
    sdp.synchronize();
    opt.step();
  }
  sdp.join(opt);
  auto last = a.flat(); // the rank that trained longest holds DDP's final model
  std::vector<double> from_last(last.size());
  if (r == R - 1) from_last = last;
  pg.broadcast(from_last, R - 1);
  CHECK(ddp_test::relative_difference(b.flat(), from_last) < 1e-5);
}

TEST_CASE("clip_grad_norm over the shards clips the whole averaged gradient") {
  auto& pg = group();
  const int R = pg.size(), r = pg.rank();
  mlp<float> a(dims, 6, false), b(dims, 6, false);
  ddp::distributed_data_parallel dp(a, pg);
  ddp::sharded_data_parallel sdp(b, pg);
  ddp::optim::sgd opt(sdp, {.lr = 0.1});
  for (int step = 0; step < 3; ++step) {
    auto [x, y] = ddp_test::make_batch<float>(dims.front(), dims.back(), R * per_rank,
                                              700u + static_cast<unsigned>(step));
    typename mlp<float>::mat xs = x.middleCols(r * per_rank, per_rank),
                             ys = y.middleCols(r * per_rank, per_rank);
    a.zero_grad();
    a.train_step(xs, ys);
    dp.synchronize();
    double sq = 0; // DDP: every rank holds the whole averaged gradient
    a.for_each_parameter([&](auto&&, auto&, auto& g) { sq += static_cast<double>(g.squaredNorm()); });
    const double max_norm = 0.05, factor = max_norm / (std::sqrt(sq) + 1e-6);
    a.for_each_parameter([&](auto&&, auto& v, auto& g) {
      if (factor < 1) g *= static_cast<float>(factor);
      v -= 0.1f * typename mlp<float>::mat(g);
    });
    b.zero_grad();
    b.train_step(xs, ys);
    sdp.synchronize();
    CHECK(sdp.clip_grad_norm(max_norm) == doctest::Approx(std::sqrt(sq)).epsilon(1e-4));
    opt.step();
  }
  CHECK(ddp_test::relative_difference(b.flat(), a.flat()) < 1e-5);
}
