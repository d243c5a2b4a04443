// The shard layout of sharded_data_parallel: sizes within one element,
// every element in exactly one run, runs where the padded wire layout says.
#include <ddp/detail/sharded/shard_layout.hpp>

#include <doctest/doctest.h>

#include <numeric>

namespace {
ddp::detail::planned_bucket bucket_of(const std::vector<std::size_t>& counts) {
  ddp::detail::planned_bucket b;
  for (std::size_t k = 0; k < counts.size(); ++k) {
    b.params.push_back(counts.size() - 1 - k); // bucket order: reverse registration
    b.offsets.push_back(b.elements);
    b.elements += counts[counts.size() - 1 - k];
  }
  return b;
}
} // namespace

TEST_CASE("every element once, shards within one element, pads where the block ends") {
  for (std::vector<std::size_t> counts :
       {std::vector<std::size_t>{10}, {3, 7, 1}, {2}, {1, 1, 1, 1, 1}, {100, 3}})
    for (int world = 1; world <= 5; ++world) {
      auto b = bucket_of(counts);
      std::vector<int> seen(b.elements, 0);
      std::size_t total = 0, smallest = b.elements, largest = 0;
      for (int rank = 0; rank < world; ++rank) {
        auto s = ddp::detail::shard_bucket(b, counts, world, rank);
        CHECK(s.block ==
              (b.elements + static_cast<std::size_t>(world) - 1) / static_cast<std::size_t>(world));
        smallest = std::min(smallest, s.size);
        largest = std::max(largest, s.size);
        total += s.size;
        std::size_t owned = 0;
        for (auto& r : s.owned) {
          CHECK(r.owner == rank);
          // Inside this rank's block of the wire layout, after the runs before it.
          CHECK(r.padded >= static_cast<std::size_t>(rank) * s.block);
          CHECK(r.padded + r.count <= static_cast<std::size_t>(rank) * s.block + s.size);
          owned += r.count;
        }
        CHECK(owned == s.size);
        if (rank == 0)
          for (auto& r : s.runs) {
            std::size_t k = 0;
            while (b.params[k] != r.param)
              ++k;
            for (std::size_t e = 0; e < r.count; ++e)
              ++seen[b.offsets[k] + r.param_offset + e];
          }
      }
      CHECK(total == b.elements);
      CHECK(largest - smallest <= 1);
      for (auto n : seen)
        CHECK(n == 1);
    }
}
