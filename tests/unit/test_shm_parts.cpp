// How reduce_scatter and all_gather through the node's segment cut a half area
// into parts (detail/shm/block_collectives.hpp): every part fits, whole cache
// lines where they can, at least one element.
#include <ddp/detail/shm/block_collectives.hpp>

#include <doctest/doctest.h>

#include <cstddef>

TEST_CASE("parts fit the half area for every rank count, element size and area size") {
  std::size_t bad = 0, unaligned = 0;
  // 2 KiB: the smallest half area (DDP_SHM_AREA_BYTES=4096); 256 KiB: the default on one node.
  for (std::size_t half : {std::size_t{2048}, std::size_t{6144}, std::size_t{256} << 10})
    for (std::size_t parts = 1; parts <= 256; ++parts)
      for (std::size_t esz : {std::size_t{2}, std::size_t{4}, std::size_t{8}}) {
        const std::size_t k = ddp::detail::shm_part_elements(half, parts, esz);
        bad += k == 0 || k * parts * esz > half;
        const std::size_t line = 64 / esz;
        unaligned += half / parts / esz >= line && k % line != 0;
      }
  CHECK(bad == 0);
  CHECK(unaligned == 0);
}

TEST_CASE("the default half area: one part per rank on whole lines, all of it for all_gather") {
  CHECK(ddp::detail::shm_part_elements(256 << 10, 1, 4) == 65536);
  CHECK(ddp::detail::shm_part_elements(256 << 10, 3, 4) == 21840); // 21845 down to 16s
  CHECK(ddp::detail::shm_part_elements(2048, 64, 8) == 4);         // 32 B each: under a line
}
