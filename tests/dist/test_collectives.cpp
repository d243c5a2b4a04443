// Every collective, dtype and op at sizes 0, 1 and 1 Mi + 3, plus ordering of
// async work. Run by ctest through ddprun at world sizes 1..4.
#include "group.hpp"

#include <ddp/detail/gloo/chain.hpp>
#include <ddp/detail/gloo/header.hpp>
#include <ddp/detail/gloo/loop_ticker.hpp>

#include <doctest/doctest.h>

#if __has_include(<Eigen/Core>) && !defined(DDP_NO_EIGEN)
#include <Eigen/Core> // ddp declares Eigen's templates; a file with Eigen objects includes Eigen
#endif

#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <numeric>
#include <sched.h>
#include <span>
#include <string>
#include <thread>

using ddp_test::group;

namespace {

constexpr std::size_t sizes[] = {0, 1, (1u << 20) + 3};

/// Small integers, exactly representable in every dtype: rank- and index-dependent.
double input_value(ddp::op o, int rank, std::size_t i) {
  switch (o) {
  case ddp::op::product: return static_cast<double>((rank + i) % 2 + 1);
  case ddp::op::min:
  case ddp::op::max: return static_cast<double>(rank + static_cast<int>(i % 5));
  default: return static_cast<double>(i % 7) + rank;
  }
}

double expected_value(ddp::op o, int world, std::size_t i) {
  double r = 0;
  switch (o) {
  case ddp::op::sum:
  case ddp::op::avg:
    for (int k = 0; k < world; ++k)
      r += input_value(o, k, i);
    return o == ddp::op::avg ? r / world : r;
  case ddp::op::product:
    r = 1;
    for (int k = 0; k < world; ++k)
      r *= input_value(o, k, i);
    return r;
  case ddp::op::min: return static_cast<double>(i % 5);
  case ddp::op::max: return static_cast<double>(world - 1 + static_cast<int>(i % 5));
  }
  return 0;
}

template <class T> T from_double(double v) {
  if constexpr (std::is_same_v<T, ::gloo::float16>)
    return ::gloo::cpu_float2half_rn(static_cast<float>(v));
  else if constexpr (std::is_integral_v<T>)
    return static_cast<T>(v);
  else
    return T(static_cast<float>(v));
}
template <class T> double to_double(T v) {
  if constexpr (std::is_same_v<T, ::gloo::float16>)
    return ::gloo::cpu_half2float(v);
  else if constexpr (std::is_integral_v<T> || std::is_floating_point_v<T>)
    return static_cast<double>(v);
  else
    return static_cast<double>(static_cast<float>(v));
}

template <class T> void check_all_reduce(ddp::op o) {
  auto& pg = group();
  for (auto n : sizes) {
    std::vector<T> v(n);
    for (std::size_t i = 0; i < n; ++i)
      v[i] = from_double<T>(input_value(o, pg.rank(), i));
    pg.all_reduce(v, o);
    std::size_t bad = 0;
    for (std::size_t i = 0; i < n; ++i) {
      double want = expected_value(o, pg.size(), i);
      if (std::is_integral_v<T> && o == ddp::op::avg) want = std::trunc(want);
      double tol = std::is_floating_point_v<T> && sizeof(T) >= 4 ? 1e-6 : 1e-2;
      if (std::abs(to_double(v[i]) - want) > tol * std::max(1.0, std::abs(want))) ++bad;
    }
    CAPTURE(n);
    CHECK(bad == 0);
  }
}

template <class T> void check_every_op() {
  for (auto o : {ddp::op::sum, ddp::op::min, ddp::op::max, ddp::op::product}) {
    CAPTURE(ddp::to_string(o));
    check_all_reduce<T>(o);
  }
  if constexpr (!std::is_integral_v<T>) {
    check_all_reduce<T>(ddp::op::avg);
  } else {
    std::vector<T> v(3);
    CHECK_THROWS_AS(group().all_reduce(v, ddp::op::avg), ddp::error);
  }
}

} // namespace

TEST_CASE("all_reduce float") { check_every_op<float>(); }
TEST_CASE("all_reduce double") { check_every_op<double>(); }
TEST_CASE("all_reduce int32") { check_every_op<std::int32_t>(); }
TEST_CASE("all_reduce int64") { check_every_op<std::int64_t>(); }
TEST_CASE("all_reduce gloo::float16") { check_every_op<::gloo::float16>(); }
#ifdef DDP_HAS_EIGEN
TEST_CASE("all_reduce Eigen::half") { check_every_op<Eigen::half>(); }
TEST_CASE("all_reduce Eigen::bfloat16") { check_every_op<Eigen::bfloat16>(); }
TEST_CASE("all_reduce an Eigen matrix") {
  auto& pg = group();
  Eigen::MatrixXd m = Eigen::MatrixXd::Constant(3, 5, pg.rank() + 1.0);
  pg.all_reduce(m, ddp::op::avg);
  CHECK(m.isApproxToConstant((pg.size() + 1) / 2.0));
}
#endif

TEST_CASE("broadcast from every root") {
  auto& pg = group();
  for (int root = 0; root < pg.size(); ++root)
    for (auto n : sizes) {
      std::vector<double> v(n, pg.rank() == root ? 10.0 + root : -1.0);
      if (n) v[n - 1] = pg.rank() == root ? 99.0 : -2.0;
      pg.broadcast(v, root);
      CAPTURE(root);
      CAPTURE(n);
      if (n) {
        CHECK(v[0] == (n == 1 ? 99.0 : 10.0 + root));
        CHECK(v[n - 1] == 99.0);
        CHECK(std::count(v.begin(), v.end(), 10.0 + root) == static_cast<long>(n - 1));
      }
    }
  std::vector<int> v(1);
  CHECK_THROWS_AS(pg.broadcast(v, pg.size()), ddp::error);
}

TEST_CASE("all_gather") {
  auto& pg = group();
  for (auto n : sizes) {
    std::vector<std::int64_t> in(n);
    std::iota(in.begin(), in.end(), std::int64_t{1000} * pg.rank());
    std::vector<std::int64_t> out(n * static_cast<std::size_t>(pg.size()), -1);
    pg.all_gather(in, out);
    bool ok = true;
    for (int r = 0; r < pg.size(); ++r)
      for (std::size_t i = 0; i < n; ++i)
        ok &= out[static_cast<std::size_t>(r) * n + i] == 1000 * r + static_cast<std::int64_t>(i);
    CAPTURE(n);
    CHECK(ok);
  }
  std::vector<std::int64_t> in(2), wrong(1);
  CHECK_THROWS_AS(pg.all_gather(in, wrong), ddp::error);
}

TEST_CASE("reduce_scatter") {
  auto& pg = group();
  const auto w = static_cast<std::size_t>(pg.size());
  for (auto n : sizes) {
    for (auto o : {ddp::op::sum, ddp::op::avg, ddp::op::max}) {
      // Block b of rank r holds b*10 + r + i.
      std::vector<float> in(n * w), out(n, -1);
      for (std::size_t b = 0; b < w; ++b)
        for (std::size_t i = 0; i < n; ++i)
          in[b * n + i] = static_cast<float>(b * 10 + pg.rank() + i % 3);
      pg.reduce_scatter(in, out, o);
      bool ok = true;
      for (std::size_t i = 0; i < n; ++i) {
        double base = pg.rank() * 10.0 + static_cast<double>(i % 3), want = 0;
        const auto wd = static_cast<double>(w);
        if (o == ddp::op::max)
          want = base + wd - 1;
        else {
          want = base * wd + wd * (wd - 1) / 2.0;
          if (o == ddp::op::avg) want /= wd;
        }
        ok &= std::abs(out[i] - want) < 1e-4 * std::max(1.0, want);
      }
      CAPTURE(n);
      CAPTURE(ddp::to_string(o));
      CHECK(ok);
    }
  }
}

TEST_CASE("barrier") {
  for (int i = 0; i < 10; ++i)
    group().barrier();
}

TEST_CASE("a large async all_reduce, then small blocking ones, never cross") {
  auto& pg = group();
  std::vector<float> big((1u << 20) + 3, 1.0f);
  auto w = pg.all_reduce_async(big);
  for (int i = 0; i < 20; ++i) {
    std::vector<std::int32_t> small{i, pg.rank()};
    pg.all_reduce(small);
    CHECK(small[0] == i * pg.size());
    CHECK(small[1] == pg.size() * (pg.size() - 1) / 2);
  }
  w.wait();
  CHECK(w.done());
  CHECK(std::all_of(big.begin(), big.end(), [&](float x) { return x == static_cast<float>(pg.size()); }));
}

TEST_CASE("many interleaved async collectives complete in order with the right values") {
  auto& pg = group();
  constexpr int count = 40;
  std::vector<std::vector<double>> bufs(count);
  std::vector<ddp::work> works;
  for (int k = 0; k < count; ++k) {
    bufs[k].assign(static_cast<std::size_t>(1 + (k * 7919) % 50000), k + pg.rank());
    if (k % 3 == 2)
      works.push_back(pg.broadcast_async(bufs[k], k % pg.size()));
    else
      works.push_back(pg.all_reduce_async(bufs[k]));
  }
  for (int k = count - 1; k >= 0; --k)
    works[static_cast<std::size_t>(k)].wait();
  for (int k = 0; k < count; ++k) {
    double want = k % 3 == 2 ? k + k % pg.size() : k * pg.size() + pg.size() * (pg.size() - 1) / 2.0;
    CAPTURE(k);
    CHECK(bufs[k].front() == want);
    CHECK(bufs[k].back() == want);
  }
}

// What process_group and DDP choose by: Gloo's refinements of the backend contract.
static_assert(ddp::fragment_communicator<ddp::gloo::communicator>);
static_assert(ddp::shm_communicator<ddp::gloo::communicator>);
static_assert(
    ddp::abortable_communicator<ddp::gloo::communicator>);         // leaving on an error fails peers at once
static_assert(!ddp::device_communicator<ddp::gloo::communicator>); // device tensors are staged instead

TEST_CASE("the fragment ring crosses piece boundaries inside and across fragments") {
  auto& pg = group();
  auto& comm = pg.communicator();
  const std::size_t default_piece = comm.ring_piece_bytes();
  CHECK(default_piece == std::size_t{1} << 20);
  // 48-byte pieces: 12 floats. Fragments of 1, 11, 12, 13, 37, 0 and 100 elements
  // put piece cuts before, at and after fragment ends, and in every ring chunk.
  comm.set_ring_piece_bytes(48);
  const std::vector<std::size_t> sizes{1, 11, 12, 13, 37, 0, 100};
  std::vector<std::vector<float>> tensors;
  for (std::size_t t = 0; t < sizes.size(); ++t) {
    tensors.emplace_back(sizes[t]);
    for (std::size_t i = 0; i < sizes[t]; ++i)
      tensors[t][i] = static_cast<float>(pg.rank() + 1) * static_cast<float>(t * 1000 + i);
  }
  for (double scale : {1.0, 0.5}) {
    std::vector<ddp::detail::fragment> frags;
    for (auto& v : tensors)
      frags.push_back({v.data(), v.size()});
    comm.all_reduce_fragments(std::move(frags), ddp::dtype::f32, scale).wait();
    // After a pass every rank holds sum_r (r + 1) * x * (scale so far) = x * W(W+1)/2 * ...
    const double w = pg.size();
    std::size_t bad = 0;
    for (std::size_t t = 0; t < sizes.size(); ++t)
      for (std::size_t i = 0; i < sizes[t]; ++i) {
        const double x = static_cast<double>(t * 1000 + i);
        const double want = scale == 1.0 ? x * w * (w + 1) / 2 : x * w * (w + 1) / 2 * w * 0.5;
        bad += std::abs(tensors[t][i] - want) > 1e-6 * std::max(1.0, want);
      }
    CHECK(bad == 0);
  }
  comm.set_ring_piece_bytes(default_piece);
}

TEST_CASE("ddp's own algorithms cross piece ends; all_gather and reduce_scatter in place") {
  auto& pg = group();
  auto& comm = pg.communicator();
  const std::size_t default_piece = comm.ring_piece_bytes();
  comm.set_ring_piece_bytes(4096 + 4); // pieces that end inside elements' runs and inside elements
  const auto w = static_cast<std::size_t>(pg.size());
  const std::size_t cap = ddp::detail::header_round::inline_cap(pg.size()) / sizeof(double);
  // 5 elements travel with the header; the others go ddp's ring, chain and exchange.
  for (std::size_t n : {std::size_t{5}, cap + 1, 3 * cap + 7}) {
    CAPTURE(n);
    // Over TCP (the ring) and, on a node with shm, through the node's segment.
    for (bool shm : {false, true}) {
      comm.use_shm(shm);
      for (auto o : {ddp::op::sum, ddp::op::avg, ddp::op::min, ddp::op::max, ddp::op::product}) {
        CAPTURE(shm);
        CAPTURE(ddp::to_string(o));
        std::vector<double> v(n);
        for (std::size_t i = 0; i < n; ++i)
          v[i] = input_value(o, pg.rank(), i);
        pg.all_reduce(v, o);
        std::size_t bad = 0;
        for (std::size_t i = 0; i < n; ++i)
          bad += std::abs(v[i] - expected_value(o, pg.size(), i)) > 1e-9 * std::max(1.0, v[i]);
        CHECK(bad == 0);
      }
    }
    comm.use_shm(true);
    for (int root = 0; root < pg.size(); ++root) {
      std::vector<double> v(n, -1.0);
      if (pg.rank() == root) std::iota(v.begin(), v.end(), 100.0 * root);
      pg.broadcast(v, root);
      std::vector<double> want(n);
      std::iota(want.begin(), want.end(), 100.0 * root);
      CAPTURE(root);
      CHECK(v == want);
    }
    // all_gather whose input is this rank's own block of the output.
    std::vector<double> all(n * w, -1.0);
    auto mine = std::span<double>(all).subspan(static_cast<std::size_t>(pg.rank()) * n, n);
    std::iota(mine.begin(), mine.end(), 1000.0 * pg.rank());
    pg.all_gather(std::span<const double>(mine), all);
    std::size_t bad = 0;
    for (std::size_t r = 0; r < w; ++r)
      for (std::size_t i = 0; i < n; ++i)
        bad += all[r * n + i] != 1000.0 * static_cast<double>(r) + static_cast<double>(i);
    CHECK(bad == 0);
    // reduce_scatter whose output is this rank's own block of the input: the
    // block is read before it is written.
    std::vector<double> blocks(n * w);
    for (std::size_t b = 0; b < w; ++b)
      for (std::size_t i = 0; i < n; ++i)
        blocks[b * n + i] = static_cast<double>(b * 10 + static_cast<std::size_t>(pg.rank()) + i % 3);
    auto out = std::span<double>(blocks).subspan(static_cast<std::size_t>(pg.rank()) * n, n);
    pg.reduce_scatter(std::span<const double>(blocks), out, ddp::op::sum);
    bad = 0;
    const double wd = static_cast<double>(w);
    for (std::size_t i = 0; i < n; ++i)
      bad += out[i] != (pg.rank() * 10.0 + static_cast<double>(i % 3)) * wd + wd * (wd - 1) / 2;
    CHECK(bad == 0);
  }
  comm.set_ring_piece_bytes(default_piece);
}

TEST_CASE("the chain's pieces: about bytes / W, at least 64 KiB, at most the ring's piece") {
  using chain = ddp::detail::chain_broadcast;
  constexpr std::size_t KiB = 1024, MiB = 1024 * KiB;
  CHECK(chain::piece_for(32 * MiB, 3, MiB) == MiB);  // large data: the largest piece
  CHECK(chain::piece_for(MiB, 8, MiB) == 128 * KiB); // a chain of 8 gets 8 pieces
  CHECK(chain::piece_for(MiB, 64, MiB) == 64 * KiB); // never below 64 KiB
  CHECK(chain::piece_for(10, 4, MiB) == 64 * KiB);   // less data than ranks
  CHECK(chain::piece_for(MiB, 1, MiB) == MiB);       // one rank
  CHECK(chain::piece_for(MiB, 64, 4100) == 4100);    // tests' small pieces stay small
  CHECK(chain::piece_for(MiB, 2, 1) == 1);           // the smallest piece
}

namespace {

/// Threads of this process whose scheduling policy is SCHED_BATCH.
int batch_threads() {
  int n = 0;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    const auto tid = static_cast<pid_t>(std::stol(task.path().filename().string()));
    if (::sched_getscheduler(tid) == SCHED_BATCH) ++n;
  }
  return n;
}

} // namespace

// Gloo's event loop thread runs SCHED_BATCH on one node, so that its wakeups
// do not preempt a thread posting a send (docs/design-notes.md, "Note [Gloo's
// loop thread]"); DDP_GLOO_LOOP_BATCH=0 leaves it alone (ctest runs that as
// dist.collectives.loop_not_batch).
TEST_CASE("Gloo's event loop thread runs SCHED_BATCH unless DDP_GLOO_LOOP_BATCH=0") {
  auto& pg = group();
  // Threads inherit the policy: under chrt -b every thread is batch already.
  if (::sched_getscheduler(0) != SCHED_OTHER) return;
  const bool wanted = ddp::detail::gloo_loop_batch_wanted(pg.topology().nnodes);
  // At world 1 there may be no mesh, so no loop to move.
  const int expected = pg.size() > 1 && wanted ? 1 : 0;
  // The loop moves itself at its first event: give it a moment.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (batch_threads() < expected && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (expected)
    CHECK(batch_threads() == 1);
  else if (!wanted)
    CHECK(batch_threads() == 0);
  pg.barrier(); // the loop still carries collectives
}
