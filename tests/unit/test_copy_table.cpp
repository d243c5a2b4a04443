// The host side of ddp's copy kernel (ddp/detail/cuda/kernels.hpp), which needs
// no GPU: the tables the kernel reads (each run cut into tiles, the total, runs
// of no elements) and the PTX in the embedded fatbin that the loader falls back to.
// tests/gpu/test_data_parallel.cpp runs the kernel on such tables.
#include <ddp/detail/cuda/kernels.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

namespace cuda = ddp::detail::cuda;

TEST_CASE("make_copy_table: each run is cut into tiles of at most copy_tile_elements") {
  float a[1], b[1];
  constexpr auto tile = cuda::copy_tile_elements;
  auto t = cuda::make_copy_table({{a, b, 5}, {a, b, 0}, {a, b, 2 * tile + 1}, {a, b, 0}, {a, b, tile}});
  REQUIRE(t.entries.size() == 5);
  CHECK(t.total == 5 + 3 * tile + 1);
  std::vector<std::pair<unsigned long long, unsigned long long>> tiles;
  for (auto& x : t.tiles)
    tiles.emplace_back(x.entry, x.offset);
  using p = std::pair<unsigned long long, unsigned long long>;
  CHECK(tiles == std::vector<p>{{0, 0}, {2, 0}, {2, tile}, {2, 2 * tile}, {4, 0}}); // none for empty runs
  CHECK(t.entries[2].count == 2 * tile + 1); // counts and pointers kept
  CHECK(t.entries[4].src == a);
  CHECK(t.entries[4].dst == b);
}

TEST_CASE("make_copy_table: empty tables and tables of empty runs have no tiles") {
  CHECK(cuda::make_copy_table({}).total == 0);
  CHECK(cuda::make_copy_table({}).tiles.empty());
  float a[1];
  auto t = cuda::make_copy_table({{a, a, 0}, {a, a, 0}});
  CHECK(t.total == 0);
  CHECK(t.tiles.empty());
  CHECK(t.entries.size() == 2);
}

TEST_CASE("kernels_fatbin_ptx: the embedded fatbin's PTX, readable by a CUDA 12.0 driver") {
  REQUIRE(cuda::kernels_fatbin_ptx < sizeof(cuda::kernels_fatbin));
  const auto* begin = reinterpret_cast<const char*>(cuda::kernels_fatbin + cuda::kernels_fatbin_ptx);
  const auto* end = reinterpret_cast<const char*>(cuda::kernels_fatbin + sizeof(cuda::kernels_fatbin));
  const auto* nul = std::find(begin, end, '\0');
  REQUIRE(nul != end); // the loader hands it to the driver as a C string
  const std::string text(begin, nul);
  CHECK(text.find(".version 8.0\n") != std::string::npos);
  CHECK(text.find(".target sm_75\n") != std::string::npos);
  CHECK(text.find(".entry ddp_convert_copy(") != std::string::npos);
}
