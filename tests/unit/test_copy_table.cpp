// The host side of ddp's copy kernel (ddp/detail/cuda/kernels.hpp), which needs
// no GPU: the tables the kernel searches (each entry's first element in the
// whole range, the total, entries of no elements) and the PTX in the embedded
// fatbin that the loader falls back to. tests/gpu/test_data_parallel.cpp runs
// the kernel on such tables.
#include <ddp/detail/cuda/kernels.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace cuda = ddp::detail::cuda;

TEST_CASE("make_copy_table: each entry's first is the sum of the counts before it") {
  float a[1], b[1];
  auto t = cuda::make_copy_table({{a, b, 5}, {a, b, 0}, {a, b, 3}, {a, b, 0}, {a, b, 0}, {a, b, 1000000}});
  REQUIRE(t.entries.size() == 6);
  std::vector<unsigned long long> first;
  for (auto& e : t.entries)
    first.push_back(e.first);
  CHECK(first == std::vector<unsigned long long>{0, 5, 5, 8, 8, 8});
  CHECK(t.total == 1000008);
  CHECK(t.entries[2].count == 3); // counts and pointers kept
  CHECK(t.entries[5].src == a);
  CHECK(t.entries[5].dst == b);
}

TEST_CASE("make_copy_table: empty tables and tables of empty entries have no elements") {
  CHECK(cuda::make_copy_table({}).total == 0);
  float a[1];
  auto t = cuda::make_copy_table({{a, a, 0}, {a, a, 0}});
  CHECK(t.total == 0);
  CHECK(t.entries[1].first == 0);
}

TEST_CASE("make_copy_table: a stale first is overwritten") {
  float a[1];
  auto t = cuda::make_copy_table({{a, a, 2, 77}, {a, a, 3, 99}});
  CHECK(t.entries[0].first == 0);
  CHECK(t.entries[1].first == 2);
  CHECK(t.total == 5);
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
