// The shared-memory all-reduce among the ranks of one node (run by ctest
// through ddprun at world 2, 3, 4, and at world 3 with DDP_SHM=0 for the TCP
// path). Every rank builds every rank's input, so it can compute the expected
// result itself: in rank order, the averaging fused into the last step, which
// is what the shm path and the TCP path for small tensors do, so those must
// match bit for bit; Gloo's ring (the TCP path above 64 KiB) sums in another
// order, so there a tolerance.
#include "group.hpp"

#include <ddp/detail/numeric/elementwise.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>

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
  CHECK(comm.shm_chunk_bytes() == (pg.topology().nnodes > 1
                                       ? ddp::detail::shm_all_reduce::default_slot_bytes
                                       : ddp::detail::shm_all_reduce::default_chunk_bytes));
}

TEST_CASE("all_reduce through shm equals the rank-order result, across chunk boundaries") {
  auto& pg = group();
  auto& comm = pg.communicator();
  const int w = pg.size();
  // 4 KiB chunks: 1024 floats, so 3 chunks + 5 and 70001 cross chunk ends, and
  // slices of a chunk end mid-cache-line at world 3.
  comm.set_shm_chunk_bytes(4096);
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
        // TCP: Gloo's ring (another order of summation) above the header's inline cap.
        // Across nodes (hierarchical): each node's sum, then Gloo's sum of those.
        const bool ring =
            (!comm.shm_active() && n * ddp::size_of(dt) > ddp::detail::header_round::inline_cap(w)) ||
            (comm.shm_active() && pg.topology().nnodes > 1);
        CHECK(differences(buf, want, dt, n, ring && (o == ddp::op::sum || o == ddp::op::avg)) == 0);
      }
  comm.set_shm_chunk_bytes(0); // the defaults
}

TEST_CASE("buckets (fragments) through shm: scaled, across fragment and chunk ends") {
  auto& pg = group();
  auto& comm = pg.communicator();
  const int w = pg.size();
  comm.set_shm_chunk_bytes(256); // 64 floats
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
  comm.set_shm_chunk_bytes(0); // the defaults
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
