// distributed_data_parallel at world sizes 1..4 against single-process oracles.
#include "../support/mlp.hpp"
#include "group.hpp"

#include <ddp/sharded_data_parallel.hpp>

#include <doctest/doctest.h>

#include <cmath>

using ddp_test::group;
using ddp_test::mlp;

namespace {

const std::vector<int> dims{6, 16, 12, 3};
constexpr int per_rank_batch = 5;
constexpr int steps = 6;

enum class marking { none, per_layer, by_tensor };

/// Trains R ranks (each its shard of every global batch) and, in this process,
/// the same MLP on the whole batches; returns the relative parameter difference.
enum class arena_kind { none, private_memory, shared_memory };

template <class S, class Bucketing, class Reduction = ddp::reduction::mean>
double train_and_compare(arena_kind arena, marking how, int micro_batches = 1,
                         std::vector<ddp::bucket_info>* layout = nullptr, bool* arena_shared = nullptr) {
  auto& pg = group();
  const int R = pg.size(), global = R * per_rank_batch * micro_batches;
  mlp<S> reference(dims, 7, false);
  // Every rank starts from different weights: the constructor must broadcast rank 0's.
  const unsigned seed = pg.rank() == 0 ? 7u : 7u + 1000u * static_cast<unsigned>(pg.rank());
  auto local = arena == arena_kind::shared_memory
                   ? mlp<S>(dims, seed, true,
                            [&](std::vector<std::size_t> sizes) {
                              return std::make_unique<ddp::arena<S>>(std::move(sizes), pg);
                            })
                   : mlp<S>(dims, seed, arena == arena_kind::private_memory);
  if (arena_shared) *arena_shared = local.grads_arena && local.grads_arena->in_shared_memory();
  ddp::distributed_data_parallel<mlp<S>, ddp::gloo, Bucketing, Reduction> dp(local, pg);
  if (layout) *layout = dp.buckets();
  const S lr = S(0.1);
  for (int step = 0; step < steps; ++step) {
    auto [x, y] =
        ddp_test::make_batch<S>(dims.front(), dims.back(), global, 100u + static_cast<unsigned>(step));
    reference.zero_grad();
    reference.train_step(x, y);
    reference.sgd(lr);

    local.zero_grad();
    const int shard = per_rank_batch * micro_batches;
    for (int m = 0; m < micro_batches; ++m) {
      auto cols = [&](const auto& a) {
        return typename mlp<S>::mat(a.middleCols(pg.rank() * shard + m * per_rank_batch, per_rank_batch));
      };
      std::function<void(std::size_t)> done;
      if (how == marking::per_layer)
        done = [&](std::size_t l) {
          dp.mark_grad_ready(2 * l);
          dp.mark_grad_ready(2 * l + 1);
        };
      else if (how == marking::by_tensor)
        done = [&](std::size_t l) {
          dp.mark_grad_ready(local.dw[l]);
          dp.mark_grad_ready(local.db[l]);
        };
      if (m + 1 < micro_batches) {
        auto guard = dp.no_sync();
        local.train_step(cols(x), cols(y), done);
        dp.synchronize(); // inside no_sync: ends the step, communicates nothing
      } else {
        local.train_step(cols(x), cols(y), done);
        dp.synchronize();
      }
    }
    local.sgd(lr / static_cast<S>(micro_batches)); // accumulated micro-batch means
  }
  return ddp_test::relative_difference(local.flat(), reference.flat());
}

/// A user-written bucketing policy: two parameters per bucket, reverse order.
struct pairs {
  static std::vector<std::vector<std::size_t>> assign(std::span<const ddp::parameter_desc> p) {
    std::vector<std::vector<std::size_t>> out;
    for (std::size_t k = p.size(); k-- > 0;) {
      if (out.empty() || out.back().size() == 2) out.emplace_back();
      out.back().push_back(k);
    }
    return out;
  }
};

using small_buckets = ddp::bucketing::size_capped<256, 128>;

} // namespace

TEST_CASE("R ranks equal one process on the whole batch: every bucketing policy, float") {
  static_assert(ddp::bucketing_policy<pairs>);
  CHECK(train_and_compare<float, ddp::bucketing::size_capped<>>(arena_kind::none, marking::per_layer) < 1e-5);
  CHECK(train_and_compare<float, small_buckets>(arena_kind::none, marking::per_layer) < 1e-5);
  CHECK(train_and_compare<float, ddp::bucketing::per_tensor>(arena_kind::none, marking::per_layer) < 1e-5);
  CHECK(train_and_compare<float, ddp::bucketing::single_buffer>(arena_kind::none, marking::per_layer) < 1e-5);
  CHECK(train_and_compare<float, pairs>(arena_kind::none, marking::by_tensor) < 1e-5);
}

TEST_CASE("equivalence in double is tighter") {
  CHECK(train_and_compare<double, small_buckets>(arena_kind::none, marking::per_layer) < 1e-12);
  CHECK(train_and_compare<double, ddp::bucketing::per_tensor>(arena_kind::none, marking::none) < 1e-12);
}

TEST_CASE("only synchronize(): unmarked gradients count as ready") {
  CHECK(train_and_compare<float, small_buckets>(arena_kind::none, marking::none) < 1e-5);
}

TEST_CASE("gradients in a ddp::arena reduce in place") {
  std::vector<ddp::bucket_info> layout;
  CHECK(train_and_compare<float, small_buckets>(arena_kind::private_memory, marking::per_layer, 1, &layout) <
        1e-5);
  REQUIRE(layout.size() > 1);
  for (auto& b : layout)
    CHECK(b.path == ddp::bucket_path::in_place);
  layout.clear();
  CHECK(train_and_compare<float, small_buckets>(arena_kind::none, marking::per_layer, 1, &layout) < 1e-5);
  for (auto& b : layout)
    CHECK((b.path == ddp::bucket_path::in_place) == (b.parameters.size() == 1)); // one tensor: contiguous
  // A compressed wire type always packs.
  CHECK(train_and_compare<float, small_buckets, ddp::reduction::bf16_compressed_mean>(
            arena_kind::private_memory, marking::per_layer, 1, &layout) < 2e-2);
  for (auto& b : layout)
    CHECK(b.path == ddp::bucket_path::packed);
}

TEST_CASE("gradients in a shared ddp::arena reduce in place in the node's shared memory") {
  auto& pg = group();
  const bool expect_shared = pg.communicator().shm_active() && pg.topology().nnodes == 1;
  std::vector<ddp::bucket_info> layout;
  bool shared = false;
  const auto runs = pg.communicator().shm_in_place_runs();
  CHECK(train_and_compare<float, small_buckets>(arena_kind::shared_memory, marking::per_layer, 1, &layout,
                                                &shared) < 1e-5);
  CHECK(shared == expect_shared);
  REQUIRE(layout.size() > 1);
  // Every bucket of every step (the warm-up included) reduced in place in shared memory.
  if (expect_shared) CHECK(pg.communicator().shm_in_place_runs() - runs >= layout.size() * steps);
  for (auto& b : layout)
    CHECK(b.path == ddp::bucket_path::in_place);
  CHECK(train_and_compare<double, ddp::bucketing::single_buffer>(arena_kind::shared_memory, marking::none) <
        1e-12);
  CHECK(
      train_and_compare<float, ddp::bucketing::per_tensor>(arena_kind::shared_memory, marking::by_tensor, 3) <
      1e-5); // no_sync micro-batches accumulate in the shared arena
  CHECK(train_and_compare<float, small_buckets, ddp::reduction::fp16_compressed_mean>(
            arena_kind::shared_memory, marking::per_layer) < 2e-2); // packs: not in place
}

TEST_CASE("gradient accumulation through no_sync") {
  CHECK(train_and_compare<float, small_buckets>(arena_kind::none, marking::per_layer, 3) < 1e-5);
  CHECK(train_and_compare<double, ddp::bucketing::per_tensor>(arena_kind::private_memory, marking::by_tensor,
                                                              2) < 1e-12);
}

TEST_CASE("bucket layout: reverse registration order, first bucket small") {
  std::vector<ddp::bucket_info> layout;
  train_and_compare<float, small_buckets>(arena_kind::none, marking::none, 1, &layout);
  // 6 parameters: fc3.bias(3) fc3.weight(36) fc2.bias(12) fc2.weight(192) fc1.bias(16) fc1.weight(96)
  REQUIRE(!layout.empty());
  CHECK(layout.front().parameters.front() == 5);
  std::size_t total = 0;
  for (auto& b : layout) {
    total += b.parameters.size();
    for (std::size_t k = 1; k < b.parameters.size(); ++k)
      CHECK(b.parameters[k] < b.parameters[k - 1]);
  }
  CHECK(total == 6);
}

namespace {

/// A model whose parameters are plain vectors; variants differ on the last rank.
struct flex_model {
  std::vector<std::string> names{"p0", "p1", "p2"};
  std::vector<std::vector<float>> v{std::vector<float>(4, 1.f), std::vector<float>(8, 2.f),
                                    std::vector<float>(3, 3.f)};
  std::vector<std::vector<float>> g{std::vector<float>(4), std::vector<float>(8), std::vector<float>(3)};
  std::vector<double> dv, dg; // a double parameter, when present
  std::vector<float> running{0.f, 0.f};
  template <class F> void for_each_parameter(F&& f) {
    for (std::size_t i = 0; i < v.size(); ++i)
      f(names[i], v[i], g[i]);
    if (!dv.empty()) f("pd", dv, dg);
  }
  template <class F> void for_each_buffer(F&& f) { f("running", running); }
};

std::string mismatch_message(flex_model& m) {
  try {
    ddp::distributed_data_parallel dp(m, group());
  } catch (const ddp::error& e) {
    CHECK(e.kind() == ddp::error_kind::mismatch);
    CHECK(e.rank() == group().size() - 1);
    return e.what();
  }
  return "no error";
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

} // namespace

TEST_CASE("mismatched models fail on every rank, naming the parameter and the rank") {
  auto& pg = group();
  if (pg.size() == 1) return;
  const bool odd = pg.rank() == pg.size() - 1;
  const std::string last = "rank " + std::to_string(pg.size() - 1);
  {
    flex_model m;
    if (odd) m.v.push_back({1.f}), m.g.push_back({0.f}), m.names.push_back("extra");
    auto msg = mismatch_message(m);
    INFO(msg);
    CHECK(has(msg, "'extra'"));
    CHECK(has(msg, last));
  }
  {
    flex_model m;
    if (odd) m.names[1] = "renamed";
    auto msg = mismatch_message(m);
    INFO(msg);
    CHECK(has(msg, "'p1'"));
    CHECK(has(msg, "'renamed'"));
    CHECK(has(msg, last));
  }
  {
    flex_model m;
    if (odd) m.v[2].resize(5), m.g[2].resize(5);
    auto msg = mismatch_message(m);
    INFO(msg);
    CHECK(has(msg, "'p2' float32 x 3"));
    CHECK(has(msg, "'p2' float32 x 5"));
  }
  {
    flex_model m;
    m.dv.assign(2, 0.0);
    m.dg.assign(2, 0.0);
    if (odd) m.dv.clear(), m.dg.clear();
    auto msg = mismatch_message(m);
    INFO(msg);
    CHECK(has(msg, "'pd' float64 x 2"));
    CHECK(has(msg, "lacks"));
  }
  // The group still works after all of that.
  std::vector<int> one{1};
  pg.all_reduce(one);
  CHECK(one[0] == pg.size());
}

TEST_CASE("construction broadcasts rank 0's parameters and buffers; synchronize() keeps buffers in step") {
  auto& pg = group();
  flex_model m;
  for (auto& x : m.v[0])
    x = static_cast<float>(pg.rank() + 10);
  m.running = {static_cast<float>(pg.rank()), 5.f};
  ddp::distributed_data_parallel dp(m, pg);
  CHECK(m.v[0][0] == 10.f);
  CHECK(m.running[0] == 0.f);
  m.running[0] = static_cast<float>(100 + pg.rank());
  dp.synchronize();
  CHECK(m.running[0] == 100.f);
  // Storage that moves between steps (a reassigned buffer, a reallocated gradient) is followed.
  std::vector<float> fresh_buffer{static_cast<float>(200 + pg.rank()), 5.f};
  m.running.swap(fresh_buffer);
  std::vector<float> fresh_grad(4, static_cast<float>(pg.rank() + 1));
  m.g[0].swap(fresh_grad);
  dp.synchronize();
  CHECK(m.running[0] == 200.f);
  CHECK(m.g[0][3] == doctest::Approx((pg.size() + 1) / 2.0));
  std::vector<float> fresh_again{static_cast<float>(300 + pg.rank()), 5.f};
  m.running.swap(fresh_again);
  dp.sync_buffers();
  CHECK(m.running[0] == 300.f);
}

TEST_CASE("mark_unused: zeros contributed, the average still received") {
  auto& pg = group();
  flex_model m;
  ddp::distributed_data_parallel<flex_model, ddp::gloo, ddp::bucketing::per_tensor> dp(m, pg);
  for (int rep = 0; rep < 3; ++rep) {
    for (std::size_t i = 0; i < 3; ++i)
      std::fill(m.g[i].begin(), m.g[i].end(), static_cast<float>(pg.rank() + 1));
    if (pg.rank() == 0) dp.mark_unused(m.g[1]);
    dp.synchronize();
    const double w = pg.size();
    const double all = w * (w + 1) / 2 / w;
    const double without0 = (w * (w + 1) / 2 - 1) / w;
    CHECK(m.g[0][0] == doctest::Approx(all));
    CHECK(m.g[1][7] == doctest::Approx(without0));
    CHECK(m.g[2][2] == doctest::Approx(all));
  }
}

TEST_CASE("strict_marking names the unmarked gradient and the rank; the next step works") {
  auto& pg = group();
  flex_model m;
  ddp::distributed_data_parallel<flex_model, ddp::gloo, ddp::bucketing::per_tensor> dp(
      m, pg, {.strict_marking = true});
  dp.mark_grad_ready(2);
  dp.mark_grad_ready(1);
  try {
    dp.synchronize();
    FAIL("expected an error");
  } catch (const ddp::error& e) {
    CHECK(has(e.what(), "'p0'"));
    CHECK(has(e.what(), "rank " + std::to_string(pg.rank())));
  }
  for (auto& x : m.g[0])
    x = 2.f;
  for (std::size_t i = 0; i < 3; ++i)
    dp.mark_grad_ready(i);
  dp.synchronize();
  CHECK(m.g[0][0] == doctest::Approx(2.f));
}

TEST_CASE("strict_marking on sharded_data_parallel: the same error, and the next step works") {
  auto& pg = group();
  flex_model m;
  ddp::sharded_data_parallel<flex_model, ddp::gloo, ddp::bucketing::per_tensor> sdp(m, pg,
                                                                                    {.strict_marking = true});
  sdp.mark_grad_ready(2); // their reduce-scatters start; p0's never does
  sdp.mark_grad_ready(1);
  try {
    sdp.synchronize();
    FAIL("expected an error");
  } catch (const ddp::error& e) {
    CHECK(has(e.what(), "'p0'"));
    CHECK(has(e.what(), "rank " + std::to_string(pg.rank())));
    CHECK(has(e.what(), "strict_marking"));
  }
  CHECK_FALSE(sdp.marked(1)); // the failed synchronize() ended the step
  ddp::optim::sgd opt(sdp, {.lr = 0.1});
  CHECK_THROWS_WITH_AS(opt.step(), doctest::Contains("before synchronize()"), ddp::error);
  for (auto& g : m.g)
    std::fill(g.begin(), g.end(), static_cast<float>(pg.rank() + 1));
  sdp.mark_grad_ready(m.g[0]);
  sdp.mark_grad_ready(std::size_t{1});
  sdp.mark_unused(m.g[2]);
  sdp.synchronize();
  const double w = pg.size(), mean = (w + 1) / 2;
  std::size_t seen = 0;
  sdp.for_each_shard([&](auto& r) {
    for (auto g : r.grad) // p2 is unused on every rank: zeros
      CHECK(g == doctest::Approx(r.parameter == 2 ? 0.0 : mean));
    seen += r.grad.size();
  });
  std::vector<std::int64_t> total{static_cast<std::int64_t>(seen)};
  pg.all_reduce(total);
  CHECK(total[0] == 4 + 8 + 3);
  // Inside no_sync() nothing is checked: synchronize() only ends the step.
  {
    auto guard = sdp.no_sync();
    sdp.synchronize();
  }
}

TEST_CASE("sharded_data_parallel refuses compute_stream, an option for device gradients") {
  flex_model m;
  ddp::ddp_options o;
  o.compute_stream = reinterpret_cast<CUstream_st*>(std::uintptr_t{1}); // never used: refused first
  CHECK_THROWS_WITH_AS(ddp::sharded_data_parallel(m, group(), o), doctest::Contains("compute_stream"),
                       ddp::error);
}

TEST_CASE("marking a gradient twice in one step names it") {
  auto& pg = group();
  flex_model m;
  ddp::distributed_data_parallel dp(m, pg);
  dp.mark_grad_ready(m.g[1]);
  try {
    dp.mark_grad_ready(m.g[1]);
    FAIL("expected an error");
  } catch (const ddp::error& e) {
    CHECK(has(e.what(), "'p1'"));
    CHECK(has(e.what(), "twice"));
  }
  dp.synchronize();
  std::vector<float> other(3);
  CHECK_THROWS_AS(dp.mark_grad_ready(other), ddp::error);
  CHECK_THROWS_AS(dp.mark_grad_ready(std::size_t{99}), ddp::error);
  dp.synchronize();
}

namespace {
void join_shadows_steps(bool shared_arena) {
  CAPTURE(shared_arena);
  auto& pg = group();
  const int R = pg.size();
  auto my_steps = [](int r) { return 2 + r; };
  mlp<double> reference(dims, 3, false);
  // Gradients in a shared arena: a joined rank's zeros must go where the
  // others reduce in place.
  auto local = shared_arena ? mlp<double>(dims, 3, true,
                                          [&](std::vector<std::size_t> sizes) {
                                            return std::make_unique<ddp::arena<double>>(std::move(sizes), pg);
                                          })
                            : mlp<double>(dims, 3, false);
  if (shared_arena)
    CHECK(local.grads_arena->in_shared_memory() ==
          (pg.communicator().shm_active() && pg.topology().nnodes == 1));
  const auto in_place_before = pg.communicator().shm_in_place_runs();
  ddp::distributed_data_parallel<mlp<double>, ddp::gloo, small_buckets> dp(local, pg,
                                                                           {.uneven_inputs = true});
  auto shard = [&](int r, int step) {
    return ddp_test::make_batch<double>(dims.front(), dims.back(), per_rank_batch,
                                        1000u + 37u * static_cast<unsigned>(r) + static_cast<unsigned>(step));
  };
  const double lr = 0.1;
  for (int step = 0; step < my_steps(pg.rank()); ++step) {
    auto [x, y] = shard(pg.rank(), step);
    local.zero_grad();
    local.train_step(x, y, [&](std::size_t l) {
      dp.mark_grad_ready(2 * l);
      dp.mark_grad_ready(2 * l + 1);
    });
    dp.synchronize();
    local.sgd(lr);
  }
  dp.join();
  // In a shared arena every bucket of every step reduced in place, shadowed ones included.
  if (shared_arena && local.grads_arena->in_shared_memory())
    CHECK(pg.communicator().shm_in_place_runs() - in_place_before >=
          static_cast<std::uint64_t>(my_steps(R - 1)));
  // The oracle: step t averages the shards of the ranks still training, over all R ranks.
  for (int step = 0; step < my_steps(R - 1); ++step) {
    std::vector<double> sum;
    for (int r = 0; r < R; ++r) {
      if (step >= my_steps(r)) continue;
      auto [x, y] = shard(r, step);
      reference.zero_grad();
      reference.train_step(x, y);
      std::vector<double> g;
      for (std::size_t l = 0; l < reference.w.size(); ++l) {
        g.insert(g.end(), reference.dw[l].data(), reference.dw[l].data() + reference.dw[l].size());
        g.insert(g.end(), reference.db[l].data(), reference.db[l].data() + reference.db[l].size());
      }
      if (sum.empty()) sum.assign(g.size(), 0.0);
      for (std::size_t i = 0; i < g.size(); ++i)
        sum[i] += g[i] / R;
    }
    std::size_t k = 0;
    for (std::size_t l = 0; l < reference.w.size(); ++l) {
      for (Eigen::Index i = 0; i < reference.dw[l].size(); ++i)
        reference.dw[l].data()[i] = sum[k++];
      for (Eigen::Index i = 0; i < reference.db[l].size(); ++i)
        reference.db[l].data()[i] = sum[k++];
    }
    reference.sgd(lr);
  }
  // Ranks that finished early stopped updating: compare the last rank, which saw every step.
  if (pg.rank() == R - 1) CHECK(ddp_test::relative_difference(local.flat(), reference.flat()) < 1e-12);
  CHECK_THROWS_AS(
      [&] {
        flex_model m;
        ddp::distributed_data_parallel plain(m, pg);
        plain.join();
      }(),
      ddp::error);
}
} // namespace

TEST_CASE("uneven inputs: join() shadows the steps of ranks that still have data") {
  join_shadows_steps(false);
  join_shadows_steps(true); // gradients in a shared arena
}

namespace {
template <class Reduction> double compressed_error_ratio(double eps) {
  auto& pg = group();
  const int R = pg.size();
  const std::size_t n = 10000;
  auto grad_of = [&](int r, std::size_t i) {
    return std::sin(0.37 * static_cast<double>(i) + r) * (1.0 + r);
  };
  flex_model m;
  m.v = {std::vector<float>(n)};
  m.g = {std::vector<float>(n)};
  m.names = {"big"};
  ddp::distributed_data_parallel<flex_model, ddp::gloo, ddp::bucketing::size_capped<>, Reduction> dp(m, pg);
  for (std::size_t i = 0; i < n; ++i)
    m.g[0][i] = static_cast<float>(grad_of(pg.rank(), i));
  dp.synchronize();
  double worst = 0;
  for (std::size_t i = 0; i < n; ++i) {
    double mean = 0, largest = 0;
    for (int r = 0; r < R; ++r) {
      mean += grad_of(r, i) / R;
      largest = std::max(largest, std::abs(grad_of(r, i)));
    }
    // The documented bound: |error| <= 2 * eps * max_r |g_r| (see reduction.hpp).
    worst = std::max(worst, std::abs(m.g[0][i] - mean) / (2 * eps * largest));
  }
  return worst; // <= 1 when within the bound
}
} // namespace

TEST_CASE("fp16 and bf16 compressed means stay within their documented error") {
  CHECK(compressed_error_ratio<ddp::reduction::fp16_compressed_mean>(std::ldexp(1.0, -11)) <= 1.0);
  CHECK(compressed_error_ratio<ddp::reduction::bf16_compressed_mean>(std::ldexp(1.0, -8)) <= 1.0);
  // The sum policy does not divide.
  flex_model m;
  ddp::distributed_data_parallel<flex_model, ddp::gloo, ddp::bucketing::size_capped<>, ddp::reduction::sum>
      dp(m, group());
  std::fill(m.g[0].begin(), m.g[0].end(), 1.f);
  dp.synchronize();
  CHECK(m.g[0][0] == static_cast<float>(group().size()));
}

TEST_CASE("large separate tensors are reduced where they lie, across chunk and tensor boundaries") {
  auto& pg = group();
  flex_model m;
  // Sizes chosen so ring chunks straddle tensor ends; the average is above the packing threshold.
  const std::vector<std::size_t> sizes{70001, 3, 50000, 300007};
  m.names = {"a", "b", "c", "d"};
  m.v.clear();
  m.g.clear();
  for (auto n : sizes) {
    m.v.emplace_back(n, 0.f);
    m.g.emplace_back(n, 0.f);
  }
  ddp::distributed_data_parallel dp(m, pg);
  bool any_unpacked_fragments = false;
  for (auto& b : dp.buckets())
    any_unpacked_fragments |= b.path == ddp::bucket_path::fragments;
  CHECK(any_unpacked_fragments);
  for (int step = 0; step < 2; ++step) {
    for (std::size_t t = 0; t < sizes.size(); ++t)
      for (std::size_t i = 0; i < sizes[t]; ++i)
        m.g[t][i] = static_cast<float>(pg.rank() + 1 + (i + t + step) % 7);
    dp.synchronize();
    std::size_t bad = 0;
    for (std::size_t t = 0; t < sizes.size(); ++t)
      for (std::size_t i = 0; i < sizes[t]; ++i) {
        const double want = (pg.size() + 1) / 2.0 + static_cast<double>((i + t + step) % 7);
        bad += std::abs(m.g[t][i] - want) > 1e-5 * want;
      }
    CHECK(bad == 0);
  }
}

namespace {
/// A type the user cannot change: no member functions at all.
struct foreign_model {
  std::vector<double> weights = std::vector<double>(6, 1.0), grads = std::vector<double>(6, 0.0);
  std::vector<double> stats = std::vector<double>(2, 0.0);
};
} // namespace

template <> struct ddp::model_traits<foreign_model> {
  template <class F> static void for_each_parameter(foreign_model& m, F&& f) {
    f("weights", m.weights, m.grads);
  }
  template <class F> static void for_each_buffer(foreign_model& m, F&& f) { f("stats", m.stats); }
};

TEST_CASE("a model_traits specialization adapts a type the user cannot change") {
  static_assert(ddp::model<foreign_model>);
  static_assert(ddp::model_with_buffers<foreign_model>);
  auto& pg = group();
  foreign_model m;
  m.stats[0] = pg.rank();
  ddp::distributed_data_parallel dp(m, pg);
  CHECK(m.stats[0] == 0.0); // rank 0's buffer everywhere
  for (auto& g : m.grads)
    g = pg.rank() + 1.0;
  dp.synchronize();
  CHECK(m.grads[5] == doctest::Approx((pg.size() + 1) / 2.0));
}

TEST_CASE("no_sync_guard can be made from the data-parallel object, as before") {
  auto& pg = group();
  flex_model m;
  ddp::distributed_data_parallel<flex_model, ddp::gloo, ddp::bucketing::per_tensor> dp(m, pg);
  for (std::size_t i = 0; i < 3; ++i)
    std::fill(m.g[i].begin(), m.g[i].end(), static_cast<float>(pg.rank() + 1));
  {
    decltype(dp)::no_sync_guard guard(dp);
    dp.synchronize(); // communicates nothing: gradients stay local
  }
  CHECK(m.g[0][0] == static_cast<float>(pg.rank() + 1));
  dp.synchronize();
  CHECK(m.g[0][0] == doctest::Approx((pg.size() + 1) / 2.0));
}

namespace {

/// Parameters p0.. and buffers b0.., as many of each as asked: ranks that disagree on the counts.
struct counted_model {
  std::vector<std::vector<float>> v, g, buf;
  counted_model(std::size_t params, std::size_t buffers)
      : v(params, std::vector<float>(2, 1.f)), g(params, std::vector<float>(2)),
        buf(buffers, std::vector<float>(1)) {}
  // Names appended, not "p" + std::to_string(i): g++ 12 at -O3 reports a false -Wrestrict
  // inside that operator+ (GCC bug 105329).
  static std::string named(char kind, std::size_t i) {
    std::string s(1, kind);
    s += std::to_string(i);
    return s;
  }
  template <class F> void for_each_parameter(F&& f) {
    for (std::size_t i = 0; i < v.size(); ++i)
      f(named('p', i), v[i], g[i]);
  }
  template <class F> void for_each_buffer(F&& f) {
    for (std::size_t i = 0; i < buf.size(); ++i)
      f(named('b', i), buf[i]);
  }
};

std::string count_mismatch(std::size_t params, std::size_t buffers) {
  counted_model m(params, buffers);
  try {
    ddp::distributed_data_parallel dp(m, group());
  } catch (const ddp::error& e) {
    CHECK(e.kind() == ddp::error_kind::mismatch);
    CHECK(e.rank() == group().size() - 1);
    return e.what();
  }
  return "no error";
}

} // namespace

TEST_CASE("ranks that disagree on the parameter or buffer count: the index and the rank are right") {
  // Once "extra buffer #18446744073709551615": the index was counted along rank 0's lines only.
  auto& pg = group();
  if (pg.size() == 1) return;
  const bool last = pg.rank() == pg.size() - 1;
  const std::string r = "rank " + std::to_string(pg.size() - 1);
  auto msg = count_mismatch(last ? 4 : 3, 2); // one parameter more, before the same buffers
  INFO(msg);
  CHECK(has(msg, r + " has an extra parameter #3 'p3' float32 x 2 that rank 0 does not have"));
  CHECK(has(msg, "(rank 0 has 3 parameters, " + r + " has 4)"));
  CHECK_FALSE(has(msg, "18446744073709551615"));

  msg = count_mismatch(last ? 1 : 3, 2); // two parameters fewer
  CHECK(has(msg, r + " lacks parameter #1 'p1' float32 x 2 that rank 0 has"));
  CHECK(has(msg, "(rank 0 has 3 parameters, " + r + " has 1)"));

  msg = count_mismatch(3, last ? 3 : 2); // one buffer more
  CHECK(has(msg, r + " has an extra buffer #2 'b2' float32 x 1 that rank 0 does not have"));
  CHECK(has(msg, "(rank 0 has 2 buffers, " + r + " has 3)"));

  msg = count_mismatch(3, last ? 0 : 1); // no buffer where rank 0 has one
  CHECK(has(msg, r + " lacks buffer #0 'b0' float32 x 1 that rank 0 has"));

  std::vector<int> one{1}; // the group still works
  pg.all_reduce(one);
  CHECK(one[0] == pg.size());
}
