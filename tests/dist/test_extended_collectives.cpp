// send/recv, all_to_all (equal and variable splits), gather, scatter and
// reduce over Gloo: exact values at sizes 0, 1 and past the header's inline
// cap, every root, in place; and ranks that disagree (count, root, counts per
// peer, a pair's send/recv) get one ddp::error(mismatch) on every rank taking
// part, fast, with the group poisoned. Run by ctest through ddprun at world
// sizes 1..4.
#include "group.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include <unistd.h>

using ddp_test::group;
using pg_t = ddp::process_group<ddp::gloo>;

namespace {

// 0, 1, and past the 64 KiB the header round carries (float: 256 KiB).
constexpr std::size_t sizes[] = {0, 1, (std::size_t{1} << 16) + 3};
constexpr auto case_timeout = std::chrono::seconds(30);

/// An exact value every rank can compute: what rank `from` puts at index i for rank `to`.
float value(int from, int to, std::size_t i) {
  return static_cast<float>(from * 1000 + to * 100 + static_cast<int>(i % 97));
}

/// Even ranks send first, odd ones receive first (blocking: a ring of blocking
/// sends would wait for each other, as with MPI's synchronous sends); with
/// `async`, every rank posts its send and its recv, then waits for both.
void ring_shift(pg_t& pg, std::size_t n, std::int64_t tag, bool async) {
  const int w = pg.size(), r = pg.rank(), right = (r + 1) % w, left = (r + w - 1) % w;
  std::vector<float> out(n), in(n, -1.0f);
  for (std::size_t i = 0; i < n; ++i)
    out[i] = value(r, right, i);
  if (async) {
    auto s = pg.send_async(out, right, tag);
    auto v = pg.recv_async(in, left, tag);
    v.wait();
    s.wait();
  } else if (r % 2 == 0) {
    pg.send(out, right, tag);
    pg.recv(in, left, tag);
  } else {
    pg.recv(in, left, tag);
    pg.send(out, right, tag);
  }
  std::size_t bad = 0;
  for (std::size_t i = 0; i < n; ++i)
    bad += in[i] != value(left, r, i);
  CAPTURE(n);
  CHECK(bad == 0);
}

/// A fresh group for one case (ddp_test::fresh_file_group), with this suite's timeout.
pg_t fresh_group(std::string& dir_out) {
  return ddp_test::fresh_file_group("ddp_extended_", dir_out, case_timeout);
}

/// Runs `call(pg)` on a fresh group; on the ranks `takes_part` names it must
/// throw mismatch fast, naming `name` and containing every string of `says`,
/// and leave the group poisoned. The suite's group goes on working.
void expect_mismatch(
    const std::function<void(pg_t&)>& call, const std::string& name,
    const std::function<std::vector<std::string>(int rank)>& says,
    const std::function<bool(int rank)>& takes_part = [](int) { return true; }) {
  auto& ctl = group();
  std::string dir;
  {
    auto pg = fresh_group(dir);
    pg.barrier(); // every rank connected: a pair failing early would close connections still forming
    if (takes_part(pg.rank())) {
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
      CAPTURE(text);
      REQUIRE(threw);
      CHECK(kind == ddp::error_kind::mismatch);
      if (!name.empty()) // the queue's description
        CHECK(text.find("rank " + std::to_string(pg.rank()) + ": " + name + " #") != std::string::npos);
      for (const auto& s : says(pg.rank())) {
        CAPTURE(s);
        CHECK(text.find(s) != std::string::npos);
      }
      CHECK(std::chrono::steady_clock::now() - t0 < case_timeout / 3); // not a timeout
      std::vector<float> v(3, 1.0f);
      CHECK_THROWS_AS(pg.all_reduce(v), ddp::error); // poisoned
    }
    // Before any rank's group goes: a rank that took no part would otherwise
    // close its connections while a peer's connect may still wait for them.
    ctl.barrier();
  }
  if (ctl.rank() == 0) std::filesystem::remove_all(dir);
}

} // namespace

TEST_CASE("send and recv: a ring shift, at 0, 1 and many elements, with tags") {
  auto& pg = group();
  if (pg.size() == 1) return; // no peer
  for (auto n : sizes) {
    ring_shift(pg, n, static_cast<std::int64_t>(n), false);
    ring_shift(pg, n, static_cast<std::int64_t>(n), true); // every rank sends first
  }
  // Either side of the 64 KiB a message carries with its header.
  for (std::size_t n : {16383u, 16384u, 16385u})
    ring_shift(pg, n, 1, true);
}

TEST_CASE("send and recv: both ranks of a pair send first, then receive, beside a collective") {
  auto& pg = group();
  if (pg.size() == 1) return;
  std::vector<float> big(300000, -1.0f);
  auto all = pg.all_reduce_async(big); // in flight beside the messages: they do not wait for it
  if (pg.rank() < 2) {
    const int peer = 1 - pg.rank();
    std::vector<double> out(70000, pg.rank() + 0.5), in(70000);
    auto s = pg.send_async(out, peer, 9);
    pg.recv(in, peer, 9);
    s.wait();
    CHECK(in[69999] == peer + 0.5);
  }
  all.wait();
  CHECK(big[0] == -1.0f * static_cast<float>(pg.size()));
}

TEST_CASE("send and recv: a pair's messages meet in the order they were posted, async") {
  auto& pg = group();
  if (pg.size() == 1) return;
  const std::size_t counts[] = {5, 0, (std::size_t{1} << 17) + 1, 1};
  if (pg.rank() == 0) {
    std::vector<std::vector<std::int64_t>> msgs;
    for (std::size_t k = 0; k < 4; ++k) {
      msgs.emplace_back(counts[k]);
      std::iota(msgs.back().begin(), msgs.back().end(), static_cast<std::int64_t>(k * 1000000));
    }
    std::vector<ddp::work> works;
    for (std::size_t k = 0; k < 4; ++k)
      works.push_back(pg.send_async(msgs[k], 1, 7));
    for (auto& w : works)
      w.wait();
  } else if (pg.rank() == 1) {
    std::vector<std::vector<std::int64_t>> got;
    for (auto c : counts)
      got.emplace_back(c, -1);
    std::vector<ddp::work> works;
    for (std::size_t k = 0; k < 4; ++k)
      works.push_back(pg.recv_async(got[k], 0, 7));
    for (auto& w : works)
      w.wait();
    for (std::size_t k = 0; k < 4; ++k) {
      std::vector<std::int64_t> want(counts[k]);
      std::iota(want.begin(), want.end(), static_cast<std::int64_t>(k * 1000000));
      CHECK(got[k] == want);
    }
  }
  // A collective after them: the other ranks' group tags stayed in step.
  std::vector<int> one{1};
  pg.all_reduce(one);
  CHECK(one[0] == pg.size());
}

TEST_CASE("send or recv with this rank or a rank outside the group is refused at once") {
  auto& pg = group();
  std::vector<float> v(2);
  CHECK_THROWS_AS(pg.send(v, pg.rank()), ddp::error);
  CHECK_THROWS_AS(pg.recv(v, pg.size()), ddp::error);
  CHECK_THROWS_AS(pg.recv(v, -1), ddp::error);
}

TEST_CASE("all_to_all with equal blocks, also in place") {
  auto& pg = group();
  const auto w = static_cast<std::size_t>(pg.size());
  for (auto n : sizes) {
    for (bool in_place : {false, true}) {
      std::vector<float> in(n * w), out(n * w, -1.0f);
      for (std::size_t p = 0; p < w; ++p)
        for (std::size_t i = 0; i < n; ++i)
          in[p * n + i] = value(pg.rank(), static_cast<int>(p), i);
      if (in_place)
        pg.all_to_all(in, in);
      else
        pg.all_to_all(in, out);
      const auto& got = in_place ? in : out;
      std::size_t bad = 0;
      for (std::size_t p = 0; p < w; ++p)
        for (std::size_t i = 0; i < n; ++i)
          bad += got[p * n + i] != value(static_cast<int>(p), pg.rank(), i);
      CAPTURE(n);
      CAPTURE(in_place);
      CHECK(bad == 0);
    }
  }
  // Arguments that do not fit: alone, a config error; among ranks, every rank fails (a case below).
  std::vector<float> odd(w + 1), out(w);
  if (w == 1) CHECK_THROWS_AS(pg.all_to_all(odd, out), ddp::error); // not whole blocks
}

TEST_CASE("all_to_all with a count per peer, small and large, async") {
  auto& pg = group();
  const int w = pg.size();
  for (std::size_t scale : {std::size_t{1}, std::size_t{40000}}) {
    // Rank r sends count(r, p) elements to p: some zero, all different.
    auto count = [&](int from, int to) { return static_cast<std::size_t>((from * w + to) % 4) * scale; };
    std::vector<std::size_t> sc(static_cast<std::size_t>(w)), rc(sc.size());
    for (int p = 0; p < w; ++p) {
      sc[static_cast<std::size_t>(p)] = count(pg.rank(), p);
      rc[static_cast<std::size_t>(p)] = count(p, pg.rank());
    }
    std::vector<float> in, out(std::accumulate(rc.begin(), rc.end(), std::size_t{0}), -1.0f);
    for (int p = 0; p < w; ++p)
      for (std::size_t i = 0; i < sc[static_cast<std::size_t>(p)]; ++i)
        in.push_back(value(pg.rank(), p, i));
    pg.all_to_all_async(in, out, sc, rc).wait();
    std::size_t bad = 0, at = 0;
    for (int p = 0; p < w; ++p)
      for (std::size_t i = 0; i < rc[static_cast<std::size_t>(p)]; ++i)
        bad += out[at++] != value(p, pg.rank(), i);
    CAPTURE(scale);
    CHECK(bad == 0);
  }
  if (w > 1) return; // among ranks, a rank's wrong counts fail every rank: a case below
  std::vector<float> v(3), o(3);
  CHECK_THROWS_AS(pg.all_to_all(v, o, {3}, {1, 2, 3, 4, 5}), ddp::error); // counts per rank
  std::vector<std::size_t> few(static_cast<std::size_t>(w), 0);
  CHECK_THROWS_AS(pg.all_to_all(v, o, few, few), ddp::error); // the sums are not the sizes
  std::vector<float> in(3), short_out(2);
  CHECK_THROWS_AS(pg.gather(in, short_out, 0), ddp::error); // the root's output
  CHECK(pg.communicator().poisoned() == nullptr);           // alone: a config error, the group goes on
}

TEST_CASE("gather and scatter at every root") {
  auto& pg = group();
  const auto w = static_cast<std::size_t>(pg.size());
  for (auto n : sizes) {
    for (int root = 0; root < pg.size(); ++root) {
      CAPTURE(n);
      CAPTURE(root);
      std::vector<double> mine(n), all(pg.rank() == root ? n * w : 0, -1.0);
      for (std::size_t i = 0; i < n; ++i)
        mine[i] = value(pg.rank(), root, i);
      pg.gather(mine, all, root);
      std::size_t bad = 0;
      if (pg.rank() == root)
        for (std::size_t p = 0; p < w; ++p)
          for (std::size_t i = 0; i < n; ++i)
            bad += all[p * n + i] != value(static_cast<int>(p), root, i);
      CHECK(bad == 0);

      std::vector<double> blocks(pg.rank() == root ? n * w : 0), got(n, -1.0);
      for (std::size_t p = 0; p < blocks.size() / std::max<std::size_t>(n, 1) && n; ++p)
        for (std::size_t i = 0; i < n; ++i)
          blocks[p * n + i] = value(root, static_cast<int>(p), i);
      pg.scatter_async(blocks, got, root).wait();
      bad = 0;
      for (std::size_t i = 0; i < n; ++i)
        bad += got[i] != value(root, pg.rank(), i);
      CHECK(bad == 0);
    }
  }
  std::vector<double> in(2), out(2 * w);
  CHECK_THROWS_AS(pg.gather(in, out, pg.size()), ddp::error); // no such root: refused on every rank
}

TEST_CASE("reduce to every root: sum, max, avg; the others keep their tensor") {
  auto& pg = group();
  const int w = pg.size();
  for (auto n : sizes) {
    for (int root = 0; root < w; ++root) {
      for (auto o : {ddp::op::sum, ddp::op::max, ddp::op::avg}) {
        std::vector<float> v(n);
        for (std::size_t i = 0; i < n; ++i)
          v[i] = static_cast<float>(pg.rank() + static_cast<int>(i % 5));
        const auto before = v;
        pg.reduce(v, root, o);
        std::size_t bad = 0;
        for (std::size_t i = 0; i < n; ++i) {
          const double base = static_cast<double>(i % 5);
          double want = o == ddp::op::max ? base + w - 1 : w * base + w * (w - 1) / 2.0;
          if (o == ddp::op::avg) want /= w;
          if (pg.rank() == root ? std::abs(v[i] - want) > 1e-5 * std::max(1.0, want) : v[i] != before[i])
            ++bad;
        }
        CAPTURE(n);
        CAPTURE(root);
        CAPTURE(ddp::to_string(o));
        CHECK(bad == 0);
      }
    }
  }
}

TEST_CASE("mismatches: counts, roots and counts per peer fail alike on every rank") {
  auto& ctl = group();
  if (ctl.size() == 1) return; // one rank cannot disagree with itself
  const int odd = ctl.size() - 1;
  auto both = [](const std::string& a, const std::string& b) {
    return [=](int) { return std::vector<std::string>{a, b}; };
  };
  expect_mismatch(
      [&](pg_t& pg) {
        const std::size_t n = pg.rank() == odd ? 3 : 2;
        std::vector<float> in(n * static_cast<std::size_t>(pg.size())), out(in.size());
        pg.all_to_all(in, out);
      },
      "all_to_all", both("all_to_all of 2 x float32", "all_to_all of 3 x float32"));
  expect_mismatch(
      [&](pg_t& pg) {
        std::vector<float> in(100000), out(pg.rank() == 0 || pg.rank() == odd ? 100000 * pg.size() : 0);
        pg.gather(in, out, pg.rank() == odd ? odd : 0);
      },
      "gather", both("to root 0", "to root " + std::to_string(odd)));
  expect_mismatch(
      [&](pg_t& pg) {
        std::vector<float> in(pg.rank() == 0 ? 4 * static_cast<std::size_t>(pg.size()) : 0),
            out(pg.rank() == odd ? 5 : 4);
        pg.scatter(in, out, 0);
      },
      "scatter", both("scatter of 4 x float32 from root 0", "scatter of 5 x float32 from root 0"));
  expect_mismatch(
      [&](pg_t& pg) {
        std::vector<float> v(10);
        pg.reduce(v, pg.rank() == odd ? odd : 0, ddp::op::sum);
      },
      "reduce", both("to root 0", "to root " + std::to_string(odd)));
  // Rank `odd` expects one element more from rank 0 than rank 0 sends it.
  expect_mismatch(
      [&](pg_t& pg) {
        const auto w = static_cast<std::size_t>(pg.size());
        std::vector<std::size_t> sc(w, 2), rc(w, 2);
        if (pg.rank() == odd) rc[0] = 3;
        std::vector<float> in(2 * w), out(std::accumulate(rc.begin(), rc.end(), std::size_t{0}));
        pg.all_to_all(in, out, sc, rc);
      },
      "all_to_all",
      both("rank 0 sends 2 elements to rank " + std::to_string(odd) + ", which expects 3 from it",
           "recv_counts[0] on rank " + std::to_string(odd)));
}

TEST_CASE("a buffer of the wrong size on one rank fails the collective on every rank, fast") {
  auto& ctl = group();
  if (ctl.size() == 1) return;
  const int last = ctl.size() - 1;
  // Before, the rank at fault threw a local error and the others waited in the header round for it
  // until their timeout.
  auto refused = [](int culprit, const std::string& detail) {
    return [=](int r) {
      return std::vector<std::string>{r == culprit ? detail
                                                   : "rank " + std::to_string(culprit) + " refused its part"};
    };
  };
  expect_mismatch(
      [](pg_t& pg) {
        std::vector<float> in(4), out(pg.rank() == 0 ? 5 : 0); // the root's output is short
        pg.gather(in, out, 0);
      },
      "gather", refused(0, "gather on root 0: output has 5 elements"));
  expect_mismatch(
      [&](pg_t& pg) {
        std::vector<float> in(pg.rank() == last ? 3 : 0), out(4);
        pg.scatter(in, out, last);
      },
      "scatter", refused(last, "scatter on root " + std::to_string(last) + ": input has 3 elements"));
  expect_mismatch(
      [&](pg_t& pg) {
        const auto w = static_cast<std::size_t>(pg.size());
        std::vector<float> in(2 * w), out(pg.rank() == last ? 2 * w + 1 : 2 * w);
        pg.all_to_all(in, out);
      },
      "all_to_all", refused(last, "output " + std::to_string(2 * ctl.size() + 1)));
  expect_mismatch(
      [&](pg_t& pg) {
        const auto w = static_cast<std::size_t>(pg.size());
        std::vector<std::size_t> sc(w, 1), rc(pg.rank() == last ? w - 1 : w, 1);
        std::vector<float> in(w), out(w);
        pg.all_to_all(in, out, sc, rc);
      },
      "all_to_all", refused(last, "recv_counts " + std::to_string(ctl.size() - 1)));
}

TEST_CASE("mismatches: a pair's send and recv, on both ranks of the pair") {
  auto& ctl = group();
  if (ctl.size() == 1) return;
  auto pair = [](int r) { return r < 2; };
  expect_mismatch(
      [](pg_t& pg) {
        std::vector<float> v(pg.rank() == 0 ? 10 : 11);
        if (pg.rank() == 0)
          pg.send(v, 1, 3);
        else
          pg.recv(v, 0, 3);
      },
      "",
      [](int r) {
        return std::vector<std::string>{r == 0 ? "rank 0: send #0 to rank 1" : "rank 1: recv #0 from rank 0",
                                        "called send to rank 1 of 10 x float32 (tag 3)",
                                        "called recv from rank 0 of 11 x float32 (tag 3)",
                                        "disagree on message #0 from rank 0 to rank 1"};
      },
      pair);
  // A sender past the inline cap against a small receive: refused before the data moves.
  expect_mismatch(
      [](pg_t& pg) {
        std::vector<float> v(pg.rank() == 0 ? 20000 : 10);
        if (pg.rank() == 0)
          pg.send(v, 1);
        else
          pg.recv(v, 0);
      },
      "",
      [](int) {
        return std::vector<std::string>{"of 20000 x float32", "of 10 x float32"};
      },
      pair);
  expect_mismatch(
      [](pg_t& pg) {
        std::vector<float> v(4);
        if (pg.rank() == 0)
          pg.send(v, 1, 1);
        else
          pg.recv(v, 0, 2);
      },
      "",
      [](int) {
        return std::vector<std::string>{"(tag 1)", "(tag 2)"};
      },
      pair);
}

TEST_CASE("a collective that fails ends the pending send/recv at once, on every rank") {
  auto& ctl = group();
  if (ctl.size() == 1) return;
  std::string dir;
  const auto t0 = std::chrono::steady_clock::now();
  {
    auto pg = fresh_group(dir);
    pg.barrier();
    const int w = pg.size(), r = pg.rank();
    // Never matched: no rank sends. Before, the failed collective left this
    // recv, and the group's teardown that waits for it, to their timeout.
    std::vector<float> in(5, -1.0f);
    auto pending = pg.recv_async(in, (r + w - 1) % w, 7);
    std::vector<float> v(r == w - 1 ? 3 : 2, 1.0f);
    ddp::error_kind kind = ddp::error_kind::config;
    try {
      pg.all_reduce(v);
    } catch (const ddp::error& e) { kind = e.kind(); }
    CHECK(kind == ddp::error_kind::mismatch);
    std::string text;
    kind = ddp::error_kind::config;
    try {
      pending.wait();
    } catch (const ddp::error& e) {
      kind = e.kind();
      text = e.what();
    }
    CAPTURE(text);
    CHECK(kind == ddp::error_kind::mismatch); // the group's error, not a timeout of its own
    CHECK(std::chrono::steady_clock::now() - t0 < case_timeout / 3);
  } // the teardown does not wait for the recv either
  CHECK(std::chrono::steady_clock::now() - t0 < case_timeout / 3);
  ctl.barrier();
  if (ctl.rank() == 0) std::filesystem::remove_all(dir);
}

TEST_CASE("a group destroyed with a send and a recv never matched fails them, without waiting") {
  auto& ctl = group();
  if (ctl.size() == 1) return;
  std::string dir;
  std::vector<float> in(5, -1.0f), out(70000, 1.0f); // a recv, and a send past the inline cap
  ddp::work recv, send;
  const auto t0 = std::chrono::steady_clock::now();
  {
    auto pg = fresh_group(dir);
    pg.barrier();
    const int w = pg.size(), r = pg.rank();
    // Nobody sends to a rank, and rank 1 posts no recv (so none meets rank 0's send).
    if (r != 1) recv = pg.recv_async(in, (r + w - 1) % w, 5);
    if (r == 0) send = pg.send_async(out, 1, 6);
  } // before, each waited out its timeout here
  CHECK(std::chrono::steady_clock::now() - t0 < case_timeout / 3);
  for (auto* wk : {&recv, &send}) {
    if ((wk == &send && ctl.rank() != 0) || (wk == &recv && ctl.rank() == 1)) continue;
    std::string text;
    try {
      wk->wait();
    } catch (const ddp::error& e) { text = e.what(); }
    CAPTURE(text);
    CHECK(text.find("was destroyed with") != std::string::npos);
    if (ctl.rank() != 1)
      CHECK(text.find("recv #0 from rank " + std::to_string((ctl.rank() + ctl.size() - 1) % ctl.size())) !=
            std::string::npos);
    if (ctl.rank() == 0) CHECK(text.find("send #0 to rank 1") != std::string::npos);
  }
  ctl.barrier();
  if (ctl.rank() == 0) std::filesystem::remove_all(dir);
}

TEST_CASE("send and recv are in the group's flight record") {
  auto& ctl = group();
  const char* dir_env = std::getenv("DDP_FLIGHT_RECORDER"); // set by its own ctest run
  if (ctl.size() == 1 || !dir_env) return;
  const std::filesystem::path fr_dir(dir_env);
  std::filesystem::create_directories(fr_dir);
  std::filesystem::remove(fr_dir / ("rank_" + std::to_string(ctl.rank()) + ".json"));
  ctl.barrier();
  std::string dir;
  {
    auto pg = fresh_group(dir);
    pg.barrier();
    if (pg.rank() < 2) {
      std::vector<float> v(4), w(pg.rank() == 0 ? 4 : 5);
      const int peer = 1 - pg.rank();
      if (pg.rank() == 0) {
        pg.send(v, peer, 1);
        CHECK_THROWS_AS(pg.send(w, peer, 2), ddp::error); // a count mismatch: the record is written
      } else {
        pg.recv(v, peer, 1);
        CHECK_THROWS_AS(pg.recv(w, peer, 2), ddp::error);
      }
      std::ifstream in(fr_dir / ("rank_" + std::to_string(pg.rank()) + ".json"));
      const std::string body((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      CAPTURE(body);
      const std::string first = pg.rank() == 0 ? "rank 0: send #0 to rank 1" : "rank 1: recv #0 from rank 0";
      const std::string second = pg.rank() == 0 ? "rank 0: send #1 to rank 1" : "rank 1: recv #1 from rank 0";
      CHECK(body.find("\"what\": \"" + first) != std::string::npos);
      CHECK(body.find("\"what\": \"" + second) != std::string::npos);
      CHECK(body.find("\"state\": \"failed\"") != std::string::npos);
    }
    ctl.barrier();
  }
  if (ctl.rank() == 0) std::filesystem::remove_all(dir);
}

namespace {
/// The "peer" of every span called `name` in a trace file, in file order.
std::vector<int> peers_of(const std::string& body, const std::string& name) {
  std::vector<int> peers;
  const std::string head = "{\"name\":\"" + name + "\"";
  for (auto at = body.find(head); at != std::string::npos; at = body.find(head, at + 1)) {
    // The span's first closing brace: its args' when it has them, else its own. Searching from
    // its "args" would run into the next span's when it has none.
    const auto end = body.find('}', at);
    const auto peer = body.find("\"peer\":", at);
    if (peer != std::string::npos && peer < end) peers.push_back(std::atoi(body.c_str() + peer + 7));
  }
  return peers;
}
} // namespace

TEST_CASE("send, recv and the extended collectives are on the timeline (DDP_TRACE)") {
  // DDP_TRACE is set by this case's own ctest run, which runs it alone at 3 ranks (at 2, a
  // send's peer and a recv's are the same rank): its group is then the process's only one, and
  // its end writes the trace (a test must not setenv beside threads).
  const char* dir_env = std::getenv("DDP_TRACE");
  if (!dir_env) return;
  const std::filesystem::path trace_dir(dir_env);
  int rank = -1, right = -1, left = -1;
  {
    auto pg = ddp::init_process_group<ddp::gloo>();
    if (pg.size() == 1) return;
    rank = pg.rank();
    right = (rank + 1) % pg.size();
    left = (rank + pg.size() - 1) % pg.size();
    std::filesystem::remove(trace_dir / ("rank_" + std::to_string(rank) + ".json"));
    pg.barrier();
    ring_shift(pg, 1000, 5, /*async=*/true); // sends to the right, receives from the left
    std::vector<float> blocks(static_cast<std::size_t>(pg.size()) * 8, 1.0f), out(blocks.size());
    pg.all_to_all(blocks, out);
  } // the group's end writes the trace
  std::ifstream in(trace_dir / ("rank_" + std::to_string(rank) + ".json"));
  const std::string body((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CAPTURE(body.substr(0, 4000));
  // A span per message on its lane's row, with its peer and bytes (1000 floats): the send's
  // peer is the rank it went to, the recv's the rank it came from.
  CHECK(peers_of(body, "send") == std::vector<int>{right});
  CHECK(peers_of(body, "recv") == std::vector<int>{left});
  CHECK(body.find("\"bytes\":4000,\"peer\":" + std::to_string(right)) != std::string::npos);
  CHECK(body.find("comm send to " + std::to_string(right)) != std::string::npos);
  CHECK(body.find("comm recv from " + std::to_string(left)) != std::string::npos);
  CHECK(body.find("\"name\":\"all_to_all\"") != std::string::npos);
}
