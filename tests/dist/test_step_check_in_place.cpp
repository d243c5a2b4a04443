// The step check (Note [step check]) on buckets reduced where the gradients lie: one block of
// gradients (an arena's layout: slot k below slot k-1) gives in-place buckets, whose ring over
// TCP once compared headers at the group's first bucket only. Ranks at different steps, a NaN
// under check_finite: an error on every rank at the next step. (A group joined by file:// has no
// shared-memory path: these run over TCP, the path that lacked the check.) Also a joined rank
// beside ranks that accumulated with no_sync() before their first step (the bucket rebuild's
// exchange), and a rebuild over such a block that keeps its buckets in place with exact means.
// Run by ctest through ddprun at world sizes 1..4.
#include "group.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <filesystem>
#include <limits>
#include <span>
#include <string>
#include <vector>

using ddp_test::group;
using pg_t = ddp::process_group<ddp::gloo>;

namespace {

/// Gradients in one block, slot k below slot k-1 (a ddp::arena's layout): in-place buckets.
struct block_model {
  struct entry {
    std::string name;
    std::vector<float> value;
    std::size_t offset, n;
  };
  std::vector<entry> entries;
  std::vector<float> block;
  explicit block_model(const std::vector<std::size_t>& sizes) {
    std::size_t total = 0;
    for (auto s : sizes)
      total += s;
    block.assign(total, 0.0f);
    std::size_t offset = total;
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      offset -= sizes[i];
      entries.push_back({"p" + std::to_string(i), std::vector<float>(sizes[i], 0.5f), offset, sizes[i]});
    }
  }
  std::span<float> grad(std::size_t k) { return {block.data() + entries[k].offset, entries[k].n}; }
  template <class F> void for_each_parameter(F&& f) {
    for (std::size_t k = 0; k < entries.size(); ++k)
      f(entries[k].name, std::span<float>(entries[k].value), grad(k));
  }
  void fill(float v) { std::fill(block.begin(), block.end(), v); }
};

constexpr auto case_timeout = std::chrono::seconds(30);

/// A fresh group for one case, over TCP (file:// groups have no shared-memory path).
pg_t fresh_group(std::string& dir) {
  return ddp_test::fresh_file_group("ddp_step_check_", dir, case_timeout);
}

/// Runs `body`; returns the ddp::error it threw (its text), or nothing.
template <class F> std::string error_of(F&& body) {
  try {
    body();
  } catch (const ddp::error& e) { return std::string("error: ") + e.what(); }
  return {};
}

bool in_place_everywhere(const std::vector<ddp::bucket_info>& buckets) {
  return std::all_of(buckets.begin(), buckets.end(),
                     [](const auto& b) { return b.path == ddp::bucket_path::in_place; });
}

} // namespace

TEST_CASE("ranks at different steps on in-place buckets: an error on every rank, every step") {
  auto& ctl = group();
  if (ctl.size() == 1) return;
  std::string dir;
  {
    auto pg = fresh_group(dir);
    REQUIRE_FALSE(pg.communicator().shm_active());
    block_model m({1000, 10});
    ddp::distributed_data_parallel dp(m, pg, {.pin_bucket_order = true});
    REQUIRE(in_place_everywhere(dp.buckets()));
    // Two steps together: the group's first in-place bucket is behind them.
    for (int step = 0; step < 2; ++step) {
      m.fill(static_cast<float>(pg.rank() + 1));
      dp.synchronize();
    }
    if (pg.rank() == 1) { // one rank accumulates alone: it is a step ahead
      auto guard = dp.no_sync();
      dp.synchronize();
    }
    m.fill(static_cast<float>(pg.rank() + 1));
    const auto t0 = std::chrono::steady_clock::now();
    const std::string said = error_of([&] { dp.synchronize(); });
    CAPTURE(said);
    CHECK(said.find("the ranks are at different steps") != std::string::npos);
    CHECK(said.find("rank 1 is at step 4") != std::string::npos);
    CHECK(std::chrono::steady_clock::now() - t0 < case_timeout / 3); // at once, not a timeout
    ctl.barrier();
  }
  if (ctl.rank() == 0) std::filesystem::remove_all(dir);
}

TEST_CASE("check_finite on in-place buckets: a NaN on one rank stops every rank before it spreads") {
  auto& ctl = group();
  if (ctl.size() == 1) return;
  std::string dir;
  {
    auto pg = fresh_group(dir);
    REQUIRE_FALSE(pg.communicator().shm_active());
    block_model m({1000, 10});
    ddp::distributed_data_parallel dp(m, pg, {.check_finite = true, .pin_bucket_order = true});
    REQUIRE(in_place_everywhere(dp.buckets()));
    m.fill(1.0f);
    dp.synchronize();
    m.fill(2.0f);
    if (pg.rank() == 1) m.grad(0)[42] = std::numeric_limits<float>::quiet_NaN();
    const std::string said = error_of([&] { dp.synchronize(); });
    CAPTURE(said);
    CHECK(said.find("'p0'") != std::string::npos);
    CHECK(said.find("rank 1") != std::string::npos);
    if (pg.rank() != 1) // the NaN never reached a peer's gradients
      CHECK(std::none_of(m.block.begin(), m.block.end(), [](float g) { return std::isnan(g); }));
    ctl.barrier();
  }
  if (ctl.rank() == 0) std::filesystem::remove_all(dir);
}

TEST_CASE("a rank that joins before its first step, beside ranks that accumulated with no_sync") {
  auto& ctl = group();
  if (ctl.size() == 1) return;
  std::string dir;
  {
    auto pg = fresh_group(dir);
    block_model m({1000, 10});
    ddp::distributed_data_parallel dp(m, pg, {.uneven_inputs = true});
    const std::string said = error_of([&] {
      if (pg.rank() != 1) { // rank 1 has no data at all
        m.fill(1.0f);
        {
          auto guard = dp.no_sync(); // one micro-batch accumulated
          dp.synchronize();
        }
        dp.synchronize();
      }
      dp.join();
    });
    CAPTURE(said);
    CHECK(said.empty());
    // The group is in step: a collective after the join lines up on every rank.
    std::vector<int> one{1};
    pg.all_reduce(one);
    CHECK(one[0] == pg.size());
  }
  if (ctl.rank() == 0) std::filesystem::remove_all(dir);
}

TEST_CASE("buckets rebuilt over a block of gradients stay in place, with exact means") {
  auto& ctl = group();
  std::string dir;
  {
    auto pg = fresh_group(dir);
    REQUIRE_FALSE(pg.communicator().shm_active());
    block_model m({10, 10, 10, 10});
    // Two tensors a bucket: the rebuild regroups them by backward's order 1 0 3 2.
    ddp::distributed_data_parallel<block_model, ddp::gloo, ddp::bucketing::size_capped<80, 80>> dp(m, pg);
    const float w = static_cast<float>(pg.size());
    for (int step = 0; step < 3; ++step) {
      for (std::size_t i = 0; i < m.block.size(); ++i)
        m.block[i] = static_cast<float>((pg.rank() + 1) * static_cast<int>(i % 7 + 1) + step);
      for (std::size_t k : {1, 0, 3, 2})
        dp.mark_grad_ready(m.grad(k));
      dp.synchronize();
      std::size_t off = 0;
      for (std::size_t i = 0; i < m.block.size(); ++i) {
        const float want = (w + 1) / 2 * static_cast<float>(i % 7 + 1) + static_cast<float>(step);
        off += std::abs(m.block[i] - want) > 1e-5f * want;
      }
      CAPTURE(step);
      CHECK(off == 0);
    }
    CHECK(in_place_everywhere(dp.buckets()));
    pg.barrier();
  }
  if (ctl.rank() == 0) std::filesystem::remove_all(dir);
}
