// The shared-memory all-reduce among the ranks of one node (run by ctest
// through ddprun at world 2, 3, 4, and at world 3 with DDP_SHM=0 for the TCP
// path). Every rank builds every rank's input, so it can compute the expected
// result itself: in rank order, the averaging fused into the last step, which
// is what the shm path and the TCP path for small tensors do, so those must
// match bit for bit; ddp's ring (the TCP path above 64 KiB) sums in another
// order, so there a tolerance.
#include "group.hpp"

#include <ddp/detail/gloo/header.hpp>
#include <ddp/detail/numeric/elementwise.hpp>
#include <ddp/detail/shm/all_reduce.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

using ddp_test::group;

namespace {

bool shm_wanted() {
  const char* v = std::getenv("DDP_SHM");
  return !(v && std::string(v) == "0");
}

std::uint64_t mix(std::uint64_t x) { // splitmix64
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/// Rank r's input: values in [-4, 4) with many significant bits, so that a
/// different order of summation shows in the bits.
void fill(std::vector<char>& buf, ddp::dtype dt, std::size_t n, int r) {
  buf.assign(n * ddp::size_of(dt), 0);
  for (std::size_t i = 0; i < n; ++i) {
    const double v = static_cast<double>(mix(i * 131 + static_cast<std::uint64_t>(r)) >> 11) / 0x1p53 * 8 - 4;
    switch (dt) {
    case ddp::dtype::f32: reinterpret_cast<float*>(buf.data())[i] = static_cast<float>(v); break;
    case ddp::dtype::f64: reinterpret_cast<double*>(buf.data())[i] = v; break;
    default:
      reinterpret_cast<std::uint16_t*>(buf.data())[i] =
          ddp::detail::float_to_half_bits(static_cast<float>(v));
    }
  }
}

double at(const std::vector<char>& buf, ddp::dtype dt, std::size_t i) {
  switch (dt) {
  case ddp::dtype::f32: return reinterpret_cast<const float*>(buf.data())[i];
  case ddp::dtype::f64: return reinterpret_cast<const double*>(buf.data())[i];
  default: return ddp::detail::half_bits_to_float(reinterpret_cast<const std::uint16_t*>(buf.data())[i]);
  }
}

/// The result reduced in rank order, the scaling fused into the last step.
std::vector<char> expected(ddp::dtype dt, ddp::op o, std::size_t n, int world, double scale) {
  std::vector<char> acc, in;
  fill(acc, dt, n, 0);
  const auto fn = ddp::detail::reduce_for(dt, o == ddp::op::avg ? ddp::op::sum : o);
  for (int r = 1; r < world; ++r) {
    fill(in, dt, n, r);
    if (r + 1 == world && scale != 1.0)
      ddp::detail::sum_scaled(acc.data(), acc.data(), in.data(), n, dt, scale);
    else if (n)
      fn(acc.data(), acc.data(), in.data(), n);
  }
  return acc;
}

/// 0 when equal bit for bit (or, with `tolerance`, within 1e-5 relative of the
/// larger magnitude involved: half 1e-2), else the number of elements that differ.
std::size_t differences(const std::vector<char>& got, const std::vector<char>& want, ddp::dtype dt,
                        std::size_t n, bool tolerance) {
  if (!tolerance) {
    // memcmp's pointers must not be null, even for 0 bytes (an empty vector's data() may be)
    if (got.size() == want.size() && (got.empty() || std::memcmp(got.data(), want.data(), got.size()) == 0))
      return 0;
  }
  const double tol = dt == ddp::dtype::f16 ? 1e-2 : 1e-5;
  std::size_t bad = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double g = at(got, dt, i), w = at(want, dt, i);
    bad += tolerance ? std::abs(g - w) > tol * std::max(1.0, std::abs(w)) * 4 : g != w;
  }
  return bad;
}

} // namespace

TEST_CASE("shm is on by default among a node's ranks; DDP_SHM=0 turns it off; the name is unlinked") {
  auto& pg = group();
  auto& comm = pg.communicator();
  CHECK(comm.shm_active() == (pg.topology().local_world_size > 1 && shm_wanted()));
  if (!comm.shm_active()) return;
  const std::string name = comm.shm_segment_name();
  CHECK(name.rfind("/ddp-", 0) == 0);
  CHECK(name.size() == 5 + 32); // a hash: the job token never shows in /dev/shm
  if (const char* token = std::getenv("DDP_TOKEN"); token && *token)
    CHECK(name.find(token) == std::string::npos);
  // Every local rank mapped it before construction returned, then the name went:
  // a rank killed from here on leaks nothing.
  CHECK_FALSE(std::filesystem::exists("/dev/shm" + name));
  CHECK(comm.shm_step_bytes() == (pg.topology().nnodes > 1
                                      ? ddp::detail::shm_all_reduce::default_area_bytes
                                      : ddp::detail::shm_all_reduce::default_step_bytes));
}

TEST_CASE("set_shm_step_bytes sets the step shm_step_bytes reads") {
  auto& comm = group().communicator();
  comm.set_shm_step_bytes(8192);
  if (comm.shm_active()) CHECK(comm.shm_step_bytes() == 8192);
  comm.set_shm_step_bytes(0); // the defaults
}

TEST_CASE("all_reduce through shm equals the rank-order result, across step boundaries") {
  auto& pg = group();
  auto& comm = pg.communicator();
  const int w = pg.size();
  // 4 KiB steps: 1024 floats, so 3 steps + 5 and 70001 cross step ends, and
  // slices of a step end mid-cache-line at world 3.
  comm.set_shm_step_bytes(4096);
  for (auto dt : {ddp::dtype::f32, ddp::dtype::f64, ddp::dtype::f16})
    for (auto o : {ddp::op::sum, ddp::op::avg, ddp::op::min, ddp::op::max})
      for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{1023}, std::size_t{3 * 1024 + 5},
                            std::size_t{70001}}) {
        CAPTURE(ddp::to_string(dt));
        CAPTURE(ddp::to_string(o));
        CAPTURE(n);
        std::vector<char> buf;
        fill(buf, dt, n, pg.rank());
        comm.all_reduce(buf.data(), n, dt, o, true).wait();
        const auto want = expected(dt, o, n, w, o == ddp::op::avg ? 1.0 / w : 1.0);
        // TCP: ddp's ring (another order of summation) above the header's inline cap.
        // Across nodes (hierarchical): each node's sum, then the leaders' ring's sum of those.
        const bool ring =
            (!comm.shm_active() && n * ddp::size_of(dt) > ddp::detail::header_round::inline_cap(w)) ||
            (comm.shm_active() && pg.topology().nnodes > 1);
        CHECK(differences(buf, want, dt, n, ring && (o == ddp::op::sum || o == ddp::op::avg)) == 0);
      }
  comm.set_shm_step_bytes(0); // the defaults
}

TEST_CASE("buckets (fragments) through shm: scaled, across fragment and step ends") {
  auto& pg = group();
  auto& comm = pg.communicator();
  const int w = pg.size();
  comm.set_shm_step_bytes(256); // 64 floats
  const std::vector<std::size_t> sizes{1, 63, 64, 65, 0, 200, 7};
  std::size_t total = 0;
  for (auto s : sizes)
    total += s;
  std::vector<char> flat;
  fill(flat, ddp::dtype::f32, total, pg.rank());
  std::vector<ddp::detail::fragment> frags;
  std::size_t off = 0;
  for (auto s : sizes) {
    frags.push_back({flat.data() + off * 4, s});
    off += s;
  }
  comm.all_reduce_fragments(std::move(frags), ddp::dtype::f32, 1.0 / w, true).wait();
  const auto want = expected(ddp::dtype::f32, ddp::op::sum, total, w, 1.0 / w);
  // Over TCP buckets take ddp's ring: another order of summation.
  CHECK(differences(flat, want, ddp::dtype::f32, total, !comm.shm_active() || pg.topology().nnodes > 1) == 0);
  comm.set_shm_step_bytes(0); // the defaults
}

TEST_CASE("shm and TCP collectives interleave in order") {
  auto& pg = group();
  std::size_t bad = 0;
  for (int i = 0; i < 20; ++i) {
    std::vector<float> a(5000, static_cast<float>(i));
    std::vector<std::int64_t> b{pg.rank() + i};
    pg.all_reduce(a);   // shm
    pg.broadcast(b, 0); // TCP
    bad += a.front() != static_cast<float>(i * pg.size()) || b.front() != i;
  }
  CHECK(bad == 0);
}

TEST_CASE("reduce_scatter and all_gather through shm equal the TCP path bit for bit, in place too") {
  auto& pg = group();
  auto& comm = pg.communicator();
  const int w = pg.size();
  const auto W = static_cast<std::size_t>(w);
  // Per block: nothing, one element, one cache line short, and more than one
  // step of the shm path (a half area holds 256 KiB on one node, split W ways
  // for reduce_scatter), ending mid-line.
  for (auto dt : {ddp::dtype::f32, ddp::dtype::f64, ddp::dtype::f16})
    for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{15}, std::size_t{(200u << 10) + 3}}) {
      CAPTURE(ddp::to_string(dt));
      CAPTURE(n);
      const std::size_t esz = ddp::size_of(dt), bytes = n * esz;
      std::vector<std::vector<char>> inputs(W);
      for (int r = 0; r < w; ++r)
        fill(inputs[static_cast<std::size_t>(r)], dt, n * W, r);
      const std::vector<char>& in = inputs[static_cast<std::size_t>(pg.rank())];
      const auto shm_runs = comm.shm_block_runs();
      for (auto o : {ddp::op::sum, ddp::op::avg, ddp::op::max}) {
        CAPTURE(ddp::to_string(o));
        std::vector<char> via_shm(bytes), via_tcp(bytes), in_place = in;
        comm.reduce_scatter(in.data(), via_shm.data(), n, dt, o, true).wait();
        comm.use_shm(false);
        comm.reduce_scatter(in.data(), via_tcp.data(), n, dt, o, true).wait();
        comm.use_shm(true);
        char* own = in_place.data() + static_cast<std::size_t>(pg.rank()) * bytes;
        comm.reduce_scatter(in_place.data(), own, n, dt, o, true).wait();
        CHECK(via_shm == via_tcp);
        CHECK((bytes == 0 || std::memcmp(own, via_tcp.data(), bytes) == 0));
        // The first elements against the blocks reduced here in rank order
        // (bit equality with TCP, itself in rank order, covers the rest).
        bool ok = true;
        for (std::size_t i = 0; i < std::min<std::size_t>(n, 64) && ok; ++i) {
          double want = 0;
          for (int r = 0; r < w; ++r) {
            const double v =
                at(inputs[static_cast<std::size_t>(r)], dt, static_cast<std::size_t>(pg.rank()) * n + i);
            want = r == 0 ? v : o == ddp::op::max ? std::max(want, v) : want + v;
          }
          if (o == ddp::op::avg) want /= w;
          ok = std::abs(at(via_shm, dt, i) - want) <= (dt == ddp::dtype::f16 ? 1e-2 : 1e-5) * 8;
        }
        CHECK(ok);
      }
      std::vector<char> mine(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(bytes));
      std::vector<char> g_shm(bytes * W), g_tcp(bytes * W);
      comm.all_gather(mine.data(), g_shm.data(), n, dt, true).wait();
      comm.use_shm(false);
      comm.all_gather(mine.data(), g_tcp.data(), n, dt, true).wait();
      comm.use_shm(true);
      std::vector<char> g_in_place(bytes * W);
      char* own = g_in_place.data() + static_cast<std::size_t>(pg.rank()) * bytes;
      if (bytes) std::memcpy(own, mine.data(), bytes);
      comm.all_gather(own, g_in_place.data(), n, dt, true).wait();
      CHECK(g_shm == g_tcp);
      CHECK(g_in_place == g_tcp);
      // Six reduce_scatters and two all_gathers took the node's segment.
      const bool one_node_shm = comm.shm_active() && pg.topology().nnodes == 1;
      CHECK(comm.shm_block_runs() - shm_runs == (one_node_shm ? 8u : 0u));
      bool ok = true;
      for (int r = 0; r < w && ok; ++r)
        ok = bytes == 0 || std::memcmp(g_shm.data() + static_cast<std::size_t>(r) * bytes,
                                       inputs[static_cast<std::size_t>(r)].data(), bytes) == 0;
      CHECK(ok);
    }
}

TEST_CASE("a shared array reduces in place: the rank-order bits, across pieces, only the range given") {
  auto& pg = group();
  auto& comm = pg.communicator();
  const int w = pg.size();
  const bool in_place = comm.shm_active() && pg.topology().nnodes == 1;
  // Bytes enough for 3 x 65536 + 5 floats (the in-place path reduces in 256 KiB
  // pieces) at an offset of 40 B: ranges need not start on a cache line.
  const std::size_t cap = 4 * (3 * 65536 + 5) + 64;
  auto arr = pg.make_shm_array<std::uint8_t>(cap);
  REQUIRE(arr.size() == cap);
  CHECK(arr.in_shared_memory() == in_place);
  std::size_t nonzero = 0;
  for (std::size_t i = 0; i < cap; ++i)
    nonzero += arr[i] != 0;
  CHECK(nonzero == 0); // zeroed
  const std::size_t at = 40;
  for (auto dt : {ddp::dtype::f32, ddp::dtype::f64, ddp::dtype::f16})
    for (auto o : {ddp::op::sum, ddp::op::avg, ddp::op::max})
      for (std::size_t n : {std::size_t{1}, std::size_t{1023}, std::size_t{3 * 65536 + 5}}) {
        const std::size_t bytes = n * ddp::size_of(dt);
        if (at + bytes > cap) continue;
        CAPTURE(ddp::to_string(dt));
        CAPTURE(ddp::to_string(o));
        CAPTURE(n);
        std::vector<char> buf;
        fill(buf, dt, n, pg.rank());
        std::memset(arr.data(), 0x5a, cap); // around the range: must stay
        std::memcpy(arr.data() + at, buf.data(), bytes);
        const auto runs = comm.shm_in_place_runs();
        comm.all_reduce(arr.data() + at, n, dt, o, true).wait();
        CHECK(comm.shm_in_place_runs() == runs + (in_place ? 1 : 0)); // the path taken
        std::vector<char> got(arr.data() + at, arr.data() + at + bytes);
        // Exact where ranks sum in rank order (in place, and TCP's small round); ddp's
        // ring and the cross-node step sum in another order.
        const bool ring = (!comm.shm_active() && bytes > ddp::detail::header_round::inline_cap(w)) ||
                          (comm.shm_active() && pg.topology().nnodes > 1);
        CHECK(differences(got, expected(dt, o, n, w, o == ddp::op::avg ? 1.0 / w : 1.0), dt, n,
                          ring && o != ddp::op::max) == 0);
        std::size_t clobbered = 0;
        for (std::size_t i = 0; i < cap; ++i)
          clobbered += (i < at || i >= at + bytes) && arr[i] != 0x5a;
        CHECK(clobbered == 0);
      }
  // Through process_group, typed, and a bucket of fragments back to back in it.
  auto floats = pg.make_shm_array<float>(1000);
  for (std::size_t i = 0; i < floats.size(); ++i)
    floats[i] = static_cast<float>(pg.rank() + 1) * static_cast<float>(i);
  pg.all_reduce(floats);
  std::size_t bad = 0;
  for (std::size_t i = 0; i < floats.size(); ++i)
    bad += floats[i] != static_cast<float>(w * (w + 1) / 2) * static_cast<float>(i);
  CHECK(bad == 0);
  for (std::size_t i = 0; i < floats.size(); ++i) // rank-dependent again: a no-op must fail
    floats[i] = static_cast<float>(pg.rank() + 1) * static_cast<float>(i);
  auto runs = comm.shm_in_place_runs();
  std::vector<ddp::detail::fragment> frags{{floats.data(), 300}, {floats.data() + 300, 700}};
  comm.all_reduce_fragments(std::move(frags), ddp::dtype::f32, 1.0, true).wait();
  CHECK(comm.shm_in_place_runs() == runs + (in_place ? 1 : 0));
  bad = 0;
  for (std::size_t i = 0; i < floats.size(); ++i)
    bad += floats[i] != static_cast<float>(w * (w + 1) / 2) * static_cast<float>(i);
  CHECK(bad == 0);
  // Fragments with a gap between them: through the segment's areas, the gap untouched.
  for (std::size_t i = 0; i < floats.size(); ++i)
    floats[i] = i >= 300 && i < 400 ? -1.0f : static_cast<float>(pg.rank() + 1);
  runs = comm.shm_in_place_runs();
  std::vector<ddp::detail::fragment> gap{{floats.data(), 300}, {floats.data() + 400, 600}};
  comm.all_reduce_fragments(std::move(gap), ddp::dtype::f32, 1.0, true).wait();
  CHECK(comm.shm_in_place_runs() == runs);
  bad = 0;
  for (std::size_t i = 0; i < floats.size(); ++i)
    bad += floats[i] != (i >= 300 && i < 400 ? -1.0f : static_cast<float>(w * (w + 1) / 2));
  CHECK(bad == 0);
  // Empty arrays are fine too.
  auto none = pg.make_shm_array<double>(0);
  CHECK(none.empty());
  pg.all_reduce(none);
}

TEST_CASE("make_shm_array with different sizes on the node's ranks: mismatch on every rank") {
  auto& pg = group();
  if (!(pg.communicator().shm_active() && pg.topology().nnodes == 1)) return;
  try {
    (void)pg.make_shm_array<float>(1000 +
                                   17 * static_cast<std::size_t>(pg.topology().local_rank)); // 68 B apart
    FAIL("no error");
  } catch (const ddp::error& e) {
    CHECK(e.kind() == ddp::error_kind::mismatch);
    CHECK(std::string(e.what()).find("make_shm_array") != std::string::npos);
    CHECK(std::string(e.what()).find("different sizes") != std::string::npos);
  }
  // The group lives on.
  std::vector<int> one{1};
  pg.all_reduce(one);
  CHECK(one[0] == pg.size());
}

// Last in this file: it poisons the group.
TEST_CASE("a shared array on some ranks and private memory on others: mismatch, naming both") {
  auto& pg = group();
  if (!(pg.communicator().shm_active() && pg.topology().nnodes == 1)) return;
  auto arr = pg.make_shm_array<float>(100);
  std::vector<float> priv(100);
  try {
    if (pg.rank() == 0)
      pg.all_reduce(arr);
    else
      pg.all_reduce(priv);
    FAIL("no error");
  } catch (const ddp::error& e) {
    CHECK(e.kind() == ddp::error_kind::mismatch);
    CHECK(std::string(e.what()).find("in place in ddp::shm_array") != std::string::npos);
  }
}

// It poisons the suite's group (fresh groups from a file:// rendezvous have no
// store, so no shared memory to disagree about): skipped in the suite, run alone
// by ctest as dist.shm.mixed_paths.
TEST_CASE("reduce_scatter through shared memory on some ranks, over TCP on others: mismatch, no hang" *
          doctest::skip()) {
  auto& pg = group();
  auto& comm = pg.communicator();
  if (pg.size() == 1 || pg.topology().nnodes > 1 || !comm.shm_active()) return;
  const bool odd = pg.rank() == pg.size() - 1;
  if (odd) comm.use_shm(false);
  std::vector<float> in(6 * static_cast<std::size_t>(pg.size()), 1.0f), out(6);
  const auto t0 = std::chrono::steady_clock::now();
  std::string text;
  try {
    pg.reduce_scatter(in, out);
  } catch (const ddp::error& e) {
    CHECK(e.kind() == ddp::error_kind::mismatch);
    text = e.what();
  }
  CAPTURE(text);
  CHECK(text.find("reduce_scatter of 6 x float32 (op sum) (through the node's shared memory)") !=
        std::string::npos);
  CHECK(text.find("call use_shm with the same value on every rank") != std::string::npos);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10)); // at the header check
}
