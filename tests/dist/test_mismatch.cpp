// Ranks that disagree on a collective (count, dtype, op, root, kind) get
// ddp::error(mismatch) on every rank, naming the collective and both sides,
// instead of Gloo aborting the process (before: gloo::EnforceNotMet on Gloo's
// I/O thread, std::terminate, rc 134). Afterwards the group is poisoned: every
// later collective throws the same error at once, no hang; other groups live on.
// Also: equal sizes on both sides of the header's inline cap give right results.
// Run by ctest through ddprun at world sizes 1..4.
#include "group.hpp"

#include <ddp/detail/gloo/header.hpp>
#include <ddp/detail/gloo/ring.hpp>

#include <doctest/doctest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <unistd.h>

using ddp_test::group;
using pg_t = ddp::process_group<ddp::gloo>;

namespace {

constexpr auto case_timeout = std::chrono::seconds(30);

/// A fresh group for one case (ddp_test::fresh_file_group), with this suite's timeout.
pg_t fresh_group(std::string& dir_out) {
  return ddp_test::fresh_file_group("ddp_mismatch_", dir_out, case_timeout);
}

/// Runs `call(pg)` on a fresh group and checks that it throws mismatch on this
/// rank, fast, with `mine` and `theirs` in the message; then that the group is
/// poisoned and the suite's group still works.
void expect_mismatch(const std::function<void(pg_t&)>& call, const std::string& name, const std::string& mine,
                     const std::string& theirs) {
  auto& ctl = group();
  std::string dir;
  {
    auto pg = fresh_group(dir);
    auto t0 = std::chrono::steady_clock::now();
    std::string text;
    ddp::error_kind kind = ddp::error_kind::config;
    bool threw = false;
    try {
      call(pg);
    } catch (const ddp::error& e) {
      threw = true;
      kind = e.kind();
      text = e.what();
    }
    auto took = std::chrono::steady_clock::now() - t0;
    CAPTURE(text);
    CAPTURE(mine);
    CAPTURE(theirs);
    REQUIRE(threw);
    CHECK(kind == ddp::error_kind::mismatch);
    CHECK(text.find("rank " + std::to_string(pg.rank()) + ": " + name + " #") !=
          std::string::npos); // the queue's description
    CHECK(text.find(mine) != std::string::npos);
    CHECK(text.find(theirs) != std::string::npos);
    CHECK(took < case_timeout / 3); // detected at the header, not by a timeout

    // Poisoned: later collectives throw the same error at once.
    t0 = std::chrono::steady_clock::now();
    std::vector<float> v(3, 1.0f);
    CHECK_THROWS_AS(pg.all_reduce(v), ddp::error);
    CHECK_THROWS_AS(pg.barrier(), ddp::error);
    try {
      pg.broadcast(v, 0);
    } catch (const ddp::error& e) { CHECK(e.kind() == ddp::error_kind::mismatch); }
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(2));
  }
  ctl.barrier(); // this process and the suite's group are fine
  if (ctl.rank() == 0) std::filesystem::remove_all(dir);
  std::vector<int> one{1};
  ctl.all_reduce(one);
  CHECK(one[0] == ctl.size());
}

bool odd_one(const pg_t& pg) { return pg.rank() == pg.size() - 1; }
/// What this rank and "the other side" (a rank that is not like this one) pass.
template <class T> T pick(const pg_t& pg, T usual, T odd) { return odd_one(pg) ? odd : usual; }
std::string side(const ddp::process_group<ddp::gloo>& ctl, const std::string& usual, const std::string& odd,
                 bool mine) {
  bool me_odd = ctl.rank() == ctl.size() - 1;
  return (me_odd == mine) ? odd : usual;
}

void count_mismatch(const std::string& name, std::size_t usual, std::size_t odd,
                    const std::function<void(pg_t&, std::size_t)>& call, const char* dt = "float32") {
  auto& ctl = group();
  auto text = [&](std::size_t n) { return std::to_string(n) + " x " + dt; };
  expect_mismatch([&](pg_t& pg) { call(pg, pick(pg, usual, odd)); }, name,
                  side(ctl, text(usual), text(odd), true), side(ctl, text(usual), text(odd), false));
}

} // namespace

TEST_CASE("all_reduce with different counts: small, large, and small against large") {
  if (group().size() == 1) return; // one rank cannot disagree with itself
  auto call = [](pg_t& pg, std::size_t n) {
    std::vector<float> v(n, 1.0f);
    pg.all_reduce(v);
  };
  count_mismatch("all_reduce", 10, 11, call);
  count_mismatch("all_reduce", (1u << 20) + 3, (1u << 20) + 1000, call); // aborted (rc 134) before
  count_mismatch("all_reduce", 10, 1u << 20, call);
  count_mismatch("all_reduce", 0, 5, call);
}

TEST_CASE("all_reduce with different dtypes, ops or ring piece sizes") {
  if (group().size() == 1) return; // one rank cannot disagree with itself
  auto& ctl = group();
  expect_mismatch(
      [](pg_t& pg) {
        if (odd_one(pg)) {
          std::vector<std::int32_t> v(100, 1);
          pg.all_reduce(v);
        } else {
          std::vector<float> v(100, 1.0f);
          pg.all_reduce(v);
        }
      },
      "all_reduce", side(ctl, "100 x float32", "100 x int32", true),
      side(ctl, "100 x float32", "100 x int32", false));
  expect_mismatch(
      [](pg_t& pg) {
        std::vector<double> v(7, 1.0);
        pg.all_reduce(v, pick(pg, ddp::op::sum, ddp::op::max));
      },
      "all_reduce", side(ctl, "op sum", "op max", true), side(ctl, "op sum", "op max", false));
  // Over TCP, where the ring's pieces shape its messages (through one node's
  // segment they do not matter, and are not compared).
  expect_mismatch(
      [](pg_t& pg) {
        pg.communicator().use_shm(false);
        pg.communicator().set_ring_piece_bytes(pick<std::size_t>(pg, 4096, 8192));
        std::vector<float> v(1u << 18, 1.0f);
        pg.all_reduce(v);
      },
      "all_reduce", side(ctl, "piece 4096 B", "piece 8192 B", true),
      side(ctl, "piece 4096 B", "piece 8192 B", false));
}

TEST_CASE("DDP buckets over TCP with different piece sizes: the header round compares them") {
  // Without the comparison the ring's messages would not line up.
  if (group().size() == 1) return; // one rank cannot disagree with itself
  auto& ctl = group();
  std::vector<float> bucket(1u << 16, 1.0f);
  expect_mismatch(
      [&bucket](pg_t& pg) {
        auto& c = pg.communicator();
        c.use_shm(false);
        c.set_ring_piece_bytes(pick<std::size_t>(pg, 4096, 8192));
        c.all_reduce_fragments({{bucket.data(), bucket.size()}}, ddp::dtype::f32, 1.0).wait();
      },
      "all_reduce", side(ctl, "piece 4096 B", "piece 8192 B", true),
      side(ctl, "piece 4096 B", "piece 8192 B", false));
}

TEST_CASE("set_ring_piece_bytes refuses 0 and more than 1 GiB") {
  auto& c = group().communicator();
  CHECK_THROWS_AS(c.set_ring_piece_bytes(0), ddp::error);
  CHECK_THROWS_AS(c.set_ring_piece_bytes((std::size_t{1} << 30) + 1), ddp::error);
  CHECK(c.ring_piece_bytes() == ddp::detail::fragment_ring::default_piece_bytes);
}

TEST_CASE("broadcast with different piece sizes: the chain's messages would not line up") {
  // Without the check: silently wrong data on one rank, or Gloo aborting the
  // process on a message longer than the receive (a reviewer's probe).
  if (group().size() == 1) return; // one rank cannot disagree with itself
  auto& ctl = group();
  expect_mismatch(
      [](pg_t& pg) {
        pg.communicator().set_ring_piece_bytes(pick<std::size_t>(pg, 4096, 8192));
        std::vector<float> v(1u << 18, 1.0f);
        pg.broadcast(v, 0);
      },
      "broadcast", side(ctl, "piece 4096 B", "piece 8192 B", true),
      side(ctl, "piece 4096 B", "piece 8192 B", false));
}

TEST_CASE("broadcast, all_gather and reduce_scatter with different counts") {
  if (group().size() == 1) return; // one rank cannot disagree with itself
  for (auto [usual, odd] : {std::pair<std::size_t, std::size_t>{3, 4}, {(1u << 20), (1u << 20) + 1}}) {
    count_mismatch("broadcast", usual, odd, [](pg_t& pg, std::size_t n) {
      std::vector<float> v(n, 1.0f);
      pg.broadcast(v, 0);
    });
    count_mismatch("all_gather", usual, odd, [](pg_t& pg, std::size_t n) {
      std::vector<float> in(n, 1.0f), out(n * static_cast<std::size_t>(pg.size()));
      pg.all_gather(in, out);
    });
    count_mismatch("reduce_scatter", usual, odd, [](pg_t& pg, std::size_t n) {
      std::vector<float> in(n * static_cast<std::size_t>(pg.size()), 1.0f), out(n);
      pg.reduce_scatter(in, out);
    });
  }
}

TEST_CASE("broadcast from different roots, and different collectives at the same point") {
  if (group().size() == 1) return; // one rank cannot disagree with itself
  auto& ctl = group();
  expect_mismatch(
      [](pg_t& pg) {
        std::vector<float> v(5, 1.0f);
        pg.broadcast(v, pick(pg, 0, 1));
      },
      "broadcast", side(ctl, "from root 0", "from root 1", true),
      side(ctl, "from root 0", "from root 1", false));
  // The description names this rank's collective; the message names the other's.
  const bool me_odd = ctl.rank() == ctl.size() - 1;
  expect_mismatch(
      [](pg_t& pg) {
        if (odd_one(pg)) {
          pg.barrier();
        } else {
          std::vector<float> v(5, 1.0f);
          pg.all_reduce(v);
        }
      },
      me_odd ? "barrier" : "all_reduce", me_odd ? "called barrier" : "called all_reduce of 5 x float32",
      me_odd ? "called all_reduce of 5 x float32" : "called barrier");
}

namespace {
template <class T> void check_around_cap() {
  auto& pg = group();
  const std::size_t w = static_cast<std::size_t>(pg.size()), r = static_cast<std::size_t>(pg.rank());
  const std::size_t cap = ddp::detail::header_round::inline_cap(pg.size()) / sizeof(T);
  for (std::size_t n : {cap - 1, cap, cap + 1, 3 * cap + 7}) {
    CAPTURE(n);
    std::vector<T> v(n);
    for (std::size_t i = 0; i < n; ++i)
      v[i] = static_cast<T>(i % 13 + r);
    pg.all_reduce(v);
    std::size_t bad = 0;
    for (std::size_t i = 0; i < n; ++i)
      bad += v[i] != static_cast<T>(w * (i % 13) + w * (w - 1) / 2);
    CHECK(bad == 0);

    for (std::size_t i = 0; i < n; ++i)
      v[i] = static_cast<T>(i % 13 + r);
    pg.all_reduce(v, ddp::op::max);
    bad = 0;
    for (std::size_t i = 0; i < n; ++i)
      bad += v[i] != static_cast<T>(i % 13 + w - 1);
    CHECK(bad == 0);

    const int root = static_cast<int>(w - 1);
    for (std::size_t i = 0; i < n; ++i)
      v[i] = static_cast<T>(r == w - 1 ? i % 11 : 99);
    pg.broadcast(v, root);
    bad = 0;
    for (std::size_t i = 0; i < n; ++i)
      bad += v[i] != static_cast<T>(i % 11);
    CHECK(bad == 0);

    std::vector<T> in(n), out(n * w);
    for (std::size_t i = 0; i < n; ++i)
      in[i] = static_cast<T>(r * 3 + i % 5);
    pg.all_gather(in, out);
    bad = 0;
    for (std::size_t k = 0; k < w; ++k)
      for (std::size_t i = 0; i < n; ++i)
        bad += out[k * n + i] != static_cast<T>(k * 3 + i % 5);
    CHECK(bad == 0);

    std::vector<T> blocks(n * w), mine(n);
    for (std::size_t k = 0; k < w; ++k)
      for (std::size_t i = 0; i < n; ++i)
        blocks[k * n + i] = static_cast<T>(k + r + i % 3);
    pg.reduce_scatter(blocks, mine);
    bad = 0;
    for (std::size_t i = 0; i < n; ++i)
      bad += mine[i] != static_cast<T>(w * (r + i % 3) + w * (w - 1) / 2);
    CHECK(bad == 0);
  }
  std::vector<float> a(10, static_cast<float>(pg.rank()));
  pg.all_reduce(a, ddp::op::avg);
  CHECK(a[9] == doctest::Approx((pg.size() - 1) / 2.0));
}
} // namespace

TEST_CASE("equal counts on both sides of the header's inline cap") {
  check_around_cap<float>();
  check_around_cap<double>();
  check_around_cap<std::int64_t>();
}

TEST_CASE("every rank gets the same bits from a small floating-point all_reduce") {
  auto& pg = group();
  std::vector<float> v(1000);
  for (std::size_t i = 0; i < v.size(); ++i)
    v[i] = 0.1f * static_cast<float>(i + 1) / static_cast<float>(pg.rank() + 3);
  pg.all_reduce(v, ddp::op::avg);
  std::vector<float> all(v.size() * static_cast<std::size_t>(pg.size()));
  pg.all_gather(v, all);
  for (int k = 1; k < pg.size(); ++k)
    CHECK(std::equal(v.begin(), v.end(), all.begin() + static_cast<std::ptrdiff_t>(v.size()) * k));
}
