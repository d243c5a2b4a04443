// ddp::sync_batch_stats and sync_batch_norm_grad_sums over Gloo: with uneven
// per-rank batches (an empty one among them at world 3 and up), every rank's
// result equals one process's statistics over the ranks' batches
// concatenated, within 1e-5 relative; a large mean next to a small spread
// keeps its digits; bad counts get an error that says what to pass. Run by
// ctest through ddprun at world sizes 1..4.
#include "group.hpp"

#include <ddp/sync_batch_stats.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

using ddp_test::group;

namespace {

constexpr std::size_t channels = 3;

/// Rank r's batch, laid out [element][channel]: every rank can build every
/// rank's batch, so each one checks against the whole concatenation.
std::vector<double> batch_of(int r, int world, double offset, double spread) {
  const std::size_t n = (world >= 3 && r == 1) ? 0 : static_cast<std::size_t>(5 + 7 * r);
  std::mt19937_64 gen(static_cast<std::uint64_t>(1000 + r));
  std::normal_distribution<double> d(0.0, 1.0);
  std::vector<double> x(n * channels);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t c = 0; c < channels; ++c)
      x[i * channels + c] =
          offset * static_cast<double>(c + 1) + spread * (d(gen) + 0.3 * static_cast<double>(c));
  return x;
}

struct oracle {
  std::vector<double> mean, var, unbiased;
  double n = 0;
};

/// Two passes in long double over the concatenated batches.
oracle whole(int world, double offset, double spread) {
  std::vector<double> all;
  for (int r = 0; r < world; ++r) {
    auto b = batch_of(r, world, offset, spread);
    all.insert(all.end(), b.begin(), b.end());
  }
  oracle o;
  const std::size_t n = all.size() / channels;
  o.n = static_cast<double>(n);
  for (std::size_t c = 0; c < channels; ++c) {
    long double s = 0;
    for (std::size_t i = 0; i < n; ++i)
      s += all[i * channels + c];
    const long double mu = s / static_cast<long double>(n);
    long double m2 = 0;
    for (std::size_t i = 0; i < n; ++i)
      m2 += (all[i * channels + c] - mu) * (all[i * channels + c] - mu);
    o.mean.push_back(static_cast<double>(mu));
    o.var.push_back(static_cast<double>(m2 / static_cast<long double>(n)));
    o.unbiased.push_back(static_cast<double>(m2 / static_cast<long double>(n - 1)));
  }
  return o;
}

template <class T> void check_close(const std::vector<T>& got, const std::vector<double>& want, double rel) {
  REQUIRE(got.size() == want.size());
  for (std::size_t c = 0; c < got.size(); ++c) {
    CAPTURE(c);
    CAPTURE(static_cast<double>(got[c]));
    CAPTURE(want[c]);
    CHECK(std::abs(static_cast<double>(got[c]) - want[c]) <= rel * std::abs(want[c]) + 1e-30);
  }
}

/// This rank's per-channel mean and biased variance, as a BatchNorm computes them, in T.
template <class T>
void local_moments(const std::vector<double>& x, std::vector<T>& mean, std::vector<T>& var) {
  const std::size_t n = x.size() / channels;
  mean.assign(channels, T(0));
  var.assign(channels, T(0));
  for (std::size_t c = 0; c < channels && n > 0; ++c) {
    double s = 0;
    for (std::size_t i = 0; i < n; ++i)
      s += x[i * channels + c];
    const double mu = s / static_cast<double>(n);
    double m2 = 0;
    for (std::size_t i = 0; i < n; ++i)
      m2 += (x[i * channels + c] - mu) * (x[i * channels + c] - mu);
    mean[c] = static_cast<T>(mu);
    var[c] = static_cast<T>(m2 / static_cast<double>(n));
  }
}

} // namespace

TEST_CASE("sync_batch_stats from mean and variance equals one process over the concatenated batches") {
  auto& pg = group();
  const int w = pg.size(), r = pg.rank();
  const auto x = batch_of(r, w, 2.0, 1.5);
  std::vector<double> mean, var;
  local_moments(x, mean, var);
  auto s = ddp::sync_batch_stats(pg, mean, var, static_cast<std::int64_t>(x.size() / channels));
  const auto o = whole(w, 2.0, 1.5);
  CHECK(s.count == static_cast<std::int64_t>(o.n));
  check_close(s.mean, o.mean, 1e-12);
  check_close(s.var, o.var, 1e-12);
  check_close(s.unbiased_var, o.unbiased, 1e-12);
}

TEST_CASE("sync_batch_stats keeps a large mean's small variance") {
  auto& pg = group();
  const int w = pg.size(), r = pg.rank();
  // A mean of 1e8 next to a spread of 1: E[x^2] - E[x]^2 in double would keep no digit of the
  // variance; the M2 combination keeps all but what rounding each rank's mean costs (1e8 * 2^-53).
  const auto x = batch_of(r, w, 1e8, 1.0);
  std::vector<double> mean, var;
  local_moments(x, mean, var);
  auto s = ddp::sync_batch_stats(pg, mean, var, static_cast<std::int64_t>(x.size() / channels));
  const auto o = whole(w, 1e8, 1.0);
  check_close(s.mean, o.mean, 1e-12);
  check_close(s.var, o.var, 1e-6);
  check_close(s.unbiased_var, o.unbiased, 1e-6);
}

TEST_CASE("sync_batch_stats over float spans gives float statistics within 1e-5") {
  auto& pg = group();
  const int w = pg.size(), r = pg.rank();
  const auto x = batch_of(r, w, 3.0, 0.5);
  std::vector<float> mean, var;
  local_moments(x, mean, var);
  auto s = ddp::sync_batch_stats(pg, std::span<const float>(mean), std::span<const float>(var),
                                 static_cast<std::int64_t>(x.size() / channels));
  static_assert(std::is_same_v<decltype(s), ddp::batch_stats<float>>);
  const auto o = whole(w, 3.0, 0.5);
  check_close(s.mean, o.mean, 1e-5);
  check_close(s.var, o.var, 1e-5);
  check_close(s.unbiased_var, o.unbiased, 1e-5);
}

TEST_CASE("sync_batch_stats_from_sums equals one process over the concatenated batches") {
  auto& pg = group();
  const int w = pg.size(), r = pg.rank();
  const auto x = batch_of(r, w, 0.5, 2.0);
  const std::size_t n = x.size() / channels;
  std::vector<double> sum(channels, 0.0), sq(channels, 0.0);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t c = 0; c < channels; ++c) {
      sum[c] += x[i * channels + c];
      sq[c] += x[i * channels + c] * x[i * channels + c];
    }
  auto s = ddp::sync_batch_stats_from_sums(pg, sum, sq, static_cast<std::int64_t>(n));
  const auto o = whole(w, 0.5, 2.0);
  CHECK(s.count == static_cast<std::int64_t>(o.n));
  check_close(s.mean, o.mean, 1e-10);
  check_close(s.var, o.var, 1e-10);
  check_close(s.unbiased_var, o.unbiased, 1e-10);
}

TEST_CASE("sync_batch_norm_grad_sums adds every rank's sums, in place") {
  auto& pg = group();
  const int w = pg.size(), r = pg.rank();
  auto mine = [](int rank) {
    std::vector<float> a(channels), b(channels);
    for (std::size_t c = 0; c < channels; ++c) {
      a[c] = 0.25f * static_cast<float>(rank + 1) + static_cast<float>(c);
      b[c] = -0.5f * static_cast<float>(rank) + 2.0f * static_cast<float>(c);
    }
    return std::pair{a, b};
  };
  auto [a, b] = mine(r);
  ddp::sync_batch_norm_grad_sums(pg, a, b);
  std::vector<double> wa(channels, 0.0), wb(channels, 0.0);
  for (int q = 0; q < w; ++q) {
    auto [qa, qb] = mine(q);
    for (std::size_t c = 0; c < channels; ++c) {
      wa[c] += qa[c];
      wb[c] += qb[c];
    }
  }
  check_close(a, wa, 1e-6);
  check_close(b, wb, 1e-6);
}

TEST_CASE("sync_batch_stats: bad counts say what to pass") {
  auto& pg = group();
  std::vector<double> m(channels, 0.0), v(channels, 1.0);
  // Checked before anything goes on the wire, so every rank passing it alone is fine.
  CHECK_THROWS_WITH_AS(ddp::sync_batch_stats(pg, m, v, -1), doctest::Contains("is negative"), ddp::error);
  // Every rank empty: the same error everywhere, after the gather.
  CHECK_THROWS_WITH_AS(ddp::sync_batch_stats(pg, m, v, 0), doctest::Contains("every rank's batch is empty"),
                       ddp::error);
  // The group is still usable.
  auto s = ddp::sync_batch_stats(pg, m, v, 4);
  CHECK(s.count == 4 * pg.size());
}
