// Plausible user mistakes never give wrong gradients in silence: each either
// trains correctly or stops with an error that names it. Gradients are set to
// (rank + 1) * (element % 7 + 1), so the mean and the sum are exact in float.
// Run through ddprun at world sizes 1..4 over the node's shared memory, and at
// world 2 and 3 over TCP (DDP_SHM=0): every case must give the same on both.
#include "../support/spawn.hpp"
#include "group.hpp"

#include <ddp/sharded_data_parallel.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

using ddp_test::group;
using pg_t = ddp::process_group<ddp::gloo>;

namespace {

/// A C-style model: named views into storage the test lays out.
struct view_model {
  struct entry {
    std::string name;
    float* value;
    float* grad;
    std::size_t n;
  };
  std::vector<entry> entries;

  template <class F> void for_each_parameter(F&& f) {
    for (auto& e : entries) {
      std::span<float> v(e.value, e.n), g(e.grad, e.n);
      f(e.name, v, g);
    }
  }
};

/// Storage for `sizes`: values and gradients in separate vectors, or the
/// gradients in one block (in registration order, or reversed as buckets launch).
enum class layout { separate, block_forward, block_reversed };

struct owned_model {
  std::vector<std::vector<float>> values, grads;
  std::vector<float> block;
  view_model model;

  owned_model(const std::vector<std::size_t>& sizes, layout how) {
    std::size_t total = 0;
    for (auto s : sizes)
      total += s;
    block.assign(total, 0.0f);
    std::size_t offset = how == layout::block_reversed ? total : 0;
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      values.emplace_back(sizes[i], 0.5f);
      grads.emplace_back(sizes[i], 0.0f);
      float* g = grads.back().data();
      if (how == layout::block_forward) {
        g = block.data() + offset;
        offset += sizes[i];
      } else if (how == layout::block_reversed) {
        offset -= sizes[i];
        g = block.data() + offset;
      }
      model.entries.push_back({"p" + std::to_string(i), sizes[i] ? values.back().data() : nullptr,
                               sizes[i] ? g : nullptr, sizes[i]});
    }
  }

  void fill(int rank) {
    for (auto& e : model.entries)
      for (std::size_t k = 0; k < e.n; ++k)
        e.grad[k] = static_cast<float>((rank + 1) * (static_cast<int>(k % 7) + 1));
  }

  /// Every gradient element equals factor * (k % 7 + 1): exactly for a sum,
  /// within float rounding for a mean (1/W is inexact at W = 3).
  void check(float factor, float tolerance = 4e-7f) const {
    for (auto& e : model.entries)
      for (std::size_t k = 0; k < e.n; ++k) {
        const float want = factor * static_cast<float>(k % 7 + 1);
        if (std::abs(e.grad[k] - want) > tolerance * want) {
          FAIL_CHECK("parameter " << e.name << " element " << k << ": " << std::to_string(e.grad[k])
                                  << " instead of " << std::to_string(want));
          return;
        }
      }
  }
};

float mean_factor(int w) { return static_cast<float>(w + 1) / 2.0f; }
float sum_factor(int w) { return static_cast<float>(w * (w + 1) / 2); }

/// The bucket paths the layouts below took, over all of them.
std::set<ddp::bucket_path> paths_seen;

template <class Bucketing, class Reduction>
void train_layout(const std::vector<std::size_t>& sizes, layout how, float factor, int steps = 2) {
  auto& pg = group();
  owned_model m(sizes, how);
  ddp::distributed_data_parallel<view_model, ddp::gloo, Bucketing, Reduction> dp(m.model, pg);
  for (auto& b : dp.buckets())
    paths_seen.insert(b.path);
  // fp16 on the wire rounds the mean's 1/W; the values themselves are exact in fp16.
  const float tolerance = std::is_same_v<Reduction, ddp::reduction::fp16_compressed_mean> ? 1e-3f : 4e-7f;
  for (int s = 0; s < steps; ++s) {
    m.fill(pg.rank());
    // Mark by tensor in registration order, then the rest at synchronize().
    for (std::size_t i = 0; i + 1 < m.model.entries.size(); ++i) {
      std::span<float> g(m.model.entries[i].grad, m.model.entries[i].n);
      dp.mark_grad_ready(g);
    }
    dp.synchronize();
    m.check(factor, tolerance);
  }
}

template <class Reduction> void every_layout(float factor) {
  // Small and large tensors (large ones cross the shm step and ring pieces), and zero-sized ones.
  const std::vector<std::size_t> sizes{5, 0, 70'000, 3, 0, 200'000, 17};
  for (auto how : {layout::separate, layout::block_forward, layout::block_reversed}) {
    CAPTURE(static_cast<int>(how));
    train_layout<ddp::bucketing::size_capped<>, Reduction>(sizes, how, factor);
    train_layout<ddp::bucketing::per_tensor, Reduction>(sizes, how, factor);
    train_layout<ddp::bucketing::single_buffer, Reduction>(sizes, how, factor);
    train_layout<ddp::bucketing::size_capped<64 << 10, 4 << 10>, Reduction>(sizes, how, factor);
  }
}

/// Runs `make()` and expects ddp::error(config) naming `a` and `b`, on every rank.
template <class F> void expect_refused(F&& make, const std::string& a, const std::string& b) {
  try {
    make();
    FAIL("accepted");
  } catch (const ddp::error& e) {
    const std::string what = e.what();
    CAPTURE(what);
    CHECK(e.kind() == ddp::error_kind::config);
    CHECK(what.find(a) != std::string::npos);
    CHECK(what.find(b) != std::string::npos);
    CHECK(e.rank() == group().rank());
  }
}

/// A fresh group for a case that poisons its group (the step check): over the
/// job's launcher environment, like the suite's own, so on one node it takes
/// the shared-memory path unless DDP_SHM=0.
pg_t fresh_group() { return ddp_test::fresh_tcp_group(std::chrono::seconds(30)); }

/// A fresh group on the heap, for a case that destroys it when it chooses (a
/// process group cannot move).
struct fresh_group_holder {
  pg_t pg = fresh_group();
};

} // namespace

TEST_CASE("every bucket path gives the exact mean and sum for every layout") {
  const int w = group().size();
  every_layout<ddp::reduction::mean>(mean_factor(w));
  every_layout<ddp::reduction::sum>(sum_factor(w));
  every_layout<ddp::reduction::fp16_compressed_mean>(mean_factor(w));
  CHECK(paths_seen.count(ddp::bucket_path::in_place) == 1);
  CHECK(paths_seen.count(ddp::bucket_path::fragments) == 1);
  CHECK(paths_seen.count(ddp::bucket_path::packed) == 1);
}

TEST_CASE("gradients that share memory are refused at construction, naming both parameters") {
  auto& pg = group();
  std::vector<float> v1(8, 1.0f), v2(8, 1.0f), shared(8, 0.0f), big(16, 0.0f);
  SUBCASE("two parameters, one gradient buffer") {
    view_model m{
        {{"encoder.weight", v1.data(), shared.data(), 8}, {"decoder.weight", v2.data(), shared.data(), 8}}};
    expect_refused([&] { ddp::distributed_data_parallel dp(m, pg); }, "encoder.weight", "decoder.weight");
  }
  SUBCASE("one parameter listed twice under two names") {
    view_model m{{{"wte", v1.data(), shared.data(), 8}, {"lm_head", v1.data(), shared.data(), 8}}};
    expect_refused([&] { ddp::distributed_data_parallel dp(m, pg); }, "'wte'", "'lm_head'");
  }
  SUBCASE("overlapping views of one block") {
    view_model m{{{"a", v1.data(), big.data(), 8}, {"b", v2.data(), big.data() + 4, 8}}};
    expect_refused([&] { ddp::sharded_data_parallel dp(m, pg); }, "'a'", "'b'");
  }
  SUBCASE("a null gradient under a non-empty parameter") {
    view_model m{{{"a", v1.data(), shared.data(), 8}, {"h.grad_later", v2.data(), nullptr, 8}}};
    expect_refused([&] { ddp::distributed_data_parallel dp(m, pg); }, "'h.grad_later'", "null");
  }
  // Adjacent views do not overlap: accepted, and the group still works (no rank communicated above).
  view_model ok{{{"a", v1.data(), big.data(), 8}, {"b", v2.data(), big.data() + 8, 8}}};
  ddp::distributed_data_parallel dp(ok, pg);
  dp.synchronize();
}

TEST_CASE("zero-sized parameters are skipped: marks by tensor or index, strict_marking, the right result") {
  auto& pg = group();
  owned_model m({4, 0, 0, 6}, layout::separate);
  ddp::ddp_options o;
  o.strict_marking = true;
  ddp::distributed_data_parallel dp(m.model, pg, o);
  for (int step = 0; step < 3; ++step) {
    m.fill(pg.rank());
    std::span<float> z1(m.model.entries[1].grad, 0), z2(m.model.entries[2].grad, 0);
    std::span<float> g0(m.model.entries[0].grad, 4);
    dp.mark_grad_ready(3);
    dp.mark_grad_ready(z2); // neither marks the other zero-sized one, nor twice
    dp.mark_grad_ready(z1);
    dp.mark_grad_ready(1);
    dp.mark_grad_ready(g0);
    dp.synchronize();
    m.check(mean_factor(pg.size()));
  }
}

TEST_CASE("a second synchronize() with no new gradients is refused on every rank and reduces nothing") {
  if (group().size() == 1) return; // one rank: reducing again changes nothing
  auto h = std::make_unique<fresh_group_holder>();
  auto& pg = h->pg;
  owned_model m({10, 3}, layout::separate);
  ddp::distributed_data_parallel<view_model, ddp::gloo, ddp::bucketing::size_capped<>, ddp::reduction::sum>
      dp(m.model, pg);
  m.fill(pg.rank());
  dp.synchronize();
  m.check(sum_factor(pg.size()));
  try {
    dp.synchronize(); // no marks: the ranks decide together, in the first bucket's header
    FAIL("a second synchronize() reduced again");
  } catch (const ddp::error& e) {
    const std::string what = e.what();
    CAPTURE(what);
    CHECK(e.kind() == ddp::error_kind::config);
    CHECK(what.find("distributed_data_parallel::synchronize, step 2, bucket 0 of 1") != std::string::npos);
    CHECK(what.find("called again on every rank with no new gradients") != std::string::npos);
  }
  m.check(sum_factor(pg.size())); // not doubled
}

TEST_CASE("a rank that marks every gradient and calls synchronize() once more stops every rank, named") {
  if (group().size() == 1) return;
  auto h = std::make_unique<fresh_group_holder>();
  auto& pg = h->pg;
  owned_model m({300, 3}, layout::separate);
  ddp::distributed_data_parallel dp(m.model, pg);
  auto step = [&] {
    m.fill(pg.rank());
    dp.mark_grad_ready(1);
    dp.mark_grad_ready(0);
    dp.synchronize();
  };
  step();
  m.check(mean_factor(pg.size()));
  try {
    if (pg.rank() == 0)
      dp.synchronize(); // rank 0 only: again, with nothing new
    else
      step(); // the others: their next step
    FAIL("rank 0's extra synchronize() was reduced with the others' next step");
  } catch (const ddp::error& e) {
    const std::string what = e.what();
    CAPTURE(what);
    CHECK(e.rank() == 0);
    CHECK(what.find("rank 0 called synchronize() again with no new gradients") != std::string::npos);
  }
  if (pg.rank() == 0) m.check(mean_factor(pg.size())); // nothing was reduced
}

TEST_CASE("gradients that equal the last mean on some ranks (synthetic values) are not refused") {
  auto& pg = group();
  const int w = pg.size();
  owned_model m({700, 70}, layout::separate);
  ddp::distributed_data_parallel dp(m.model, pg);
  for (int step = 0; step < 4; ++step) {
    // At world 3, rank 0's values of step s+1 equal the mean of step s almost everywhere.
    for (auto& e : m.model.entries)
      for (std::size_t k = 0; k < e.n; ++k)
        e.grad[k] =
            static_cast<float>(pg.rank() + 1 + static_cast<int>((k + static_cast<std::size_t>(step)) % 7));
    dp.synchronize();
    for (auto& e : m.model.entries)
      for (std::size_t k = 0; k < e.n; k += 97)
        CHECK(e.grad[k] ==
              doctest::Approx((w + 1) / 2.0 + static_cast<double>((k + static_cast<std::size_t>(step)) % 7)));
  }
  // All-zero gradients prove nothing: synchronizing zeros twice is allowed.
  for (auto& g : m.grads)
    std::fill(g.begin(), g.end(), 0.0f);
  dp.synchronize();
  dp.synchronize();
}

TEST_CASE("ranks at different steps stop at the first bucket, naming the rank that went ahead") {
  if (group().size() == 1) return;
  SUBCASE("no_sync() on one rank only") {
    auto pg = fresh_group();
    owned_model m({1000, 10}, layout::separate);
    ddp::distributed_data_parallel dp(m.model, pg);
    m.fill(pg.rank());
    dp.synchronize(); // step 1 everywhere
    if (pg.rank() == 1) {
      auto guard = dp.no_sync();
      dp.synchronize(); // rank 1 only: step 2 accumulates
    }
    try {
      m.fill(pg.rank());
      dp.synchronize(); // rank 1 is at step 3, the others at step 2
      FAIL("the ranks reduced different steps");
    } catch (const ddp::error& e) {
      const std::string what = e.what();
      CAPTURE(what);
      CHECK(e.kind() == ddp::error_kind::mismatch);
      CHECK(e.rank() == 1);
      CHECK(what.find("distributed_data_parallel::synchronize") != std::string::npos);
      CHECK(what.find("rank 1 is at step 3") != std::string::npos);
      CHECK(what.find("look at rank 1's code") != std::string::npos);
    }
  }
  SUBCASE("a rank behind the others is the one named, on every rank") {
    if (group().size() < 3) return;
    auto pg = fresh_group();
    owned_model m({1000, 10}, layout::separate);
    ddp::distributed_data_parallel dp(m.model, pg);
    m.fill(pg.rank());
    if (pg.rank() != 1) {
      auto guard = dp.no_sync();
      dp.synchronize(); // every rank but 1 counts an accumulating step
    }
    try {
      dp.synchronize();
      FAIL("the ranks reduced different steps");
    } catch (const ddp::error& e) {
      const std::string what = e.what();
      CAPTURE(what);
      CHECK(e.rank() == 1);
      CHECK(what.find("rank 1 is at step 1") != std::string::npos);
      CHECK(what.find("counted 1 synchronize() call(s) fewer") != std::string::npos);
    }
  }
  SUBCASE("legitimate accumulation on every rank keeps them in step") {
    auto pg = fresh_group();
    owned_model m({1000, 10}, layout::separate);
    ddp::distributed_data_parallel dp(m.model, pg);
    for (int step = 0; step < 3; ++step) {
      m.fill(pg.rank());
      {
        auto guard = dp.no_sync();
        dp.synchronize();
      }
      dp.synchronize();
      m.check(mean_factor(pg.size()));
    }
  }
}

TEST_CASE("a gradient replaced before any bucket launched is followed") {
  auto& pg = group();
  owned_model m({1000, 20000}, layout::separate);
  ddp::distributed_data_parallel<view_model, ddp::gloo, ddp::bucketing::single_buffer> dp(m.model, pg);
  m.fill(pg.rank());
  dp.mark_grad_ready(1);
  // Replaced after its mark, as a move-assignment in backward would: nothing has read it yet.
  m.grads[1] = std::vector<float>(20000, 0.0f);
  m.model.entries[1].grad = m.grads[1].data();
  m.fill(pg.rank());
  dp.synchronize();
  m.check(mean_factor(pg.size()));
}

TEST_CASE("a gradient replaced after its step's first bucket launched stops every rank, naming it") {
  if (group().size() == 1) return;
  auto h = std::make_unique<fresh_group_holder>();
  auto& pg = h->pg;
  owned_model m({20000, 1000}, layout::separate);
  // One bucket per tensor, launched in reverse registration order: p1's first, p0's last.
  ddp::distributed_data_parallel<view_model, ddp::gloo, ddp::bucketing::per_tensor> dp(m.model, pg);
  m.fill(pg.rank());
  dp.mark_grad_ready(1); // bucket 0 is on the wire
  std::vector<float> replaced(20000, 1.0f);
  if (pg.rank() == 1) m.model.entries[0].grad = replaced.data(); // p0's storage replaced on rank 1 only
  group().barrier(); // every rank is past construction before rank 1 fails the group
  try {
    dp.synchronize();
    FAIL("a bucket read replaced storage");
  } catch (const ddp::error& e) {
    const std::string what = e.what();
    CAPTURE(what);
    CHECK(e.rank() == 1);
    CHECK(what.find("'p0' was replaced by new storage after this step's first bucket started") !=
          std::string::npos);
  }
}

TEST_CASE("a tensor marked after its storage moved, once a bucket launched, is refused with advice") {
  auto h = std::make_unique<fresh_group_holder>();
  auto& pg = h->pg;
  owned_model m({4, 8, 3}, layout::separate);
  ddp::distributed_data_parallel<view_model, ddp::gloo, ddp::bucketing::per_tensor> dp(m.model, pg);
  std::span<float> g2(m.model.entries[2].grad, 3);
  dp.mark_grad_ready(g2); // bucket 0 (reverse registration order): launched
  std::vector<float> moved(4, static_cast<float>(pg.rank() + 1));
  m.model.entries[0].grad = moved.data(); // p0's gradient now lives elsewhere
  try {
    dp.mark_grad_ready(std::span<float>(moved));
    FAIL("expected an error");
  } catch (const ddp::error& e) {
    CHECK(e.kind() == ddp::error_kind::config);
    CHECK(std::string(e.what()).find("move it before backward") != std::string::npos);
  }
  if (pg.size() == 1) return; // the rest is about the peers
  group().barrier();          // every rank is past construction before the first fails the group
  try {
    dp.synchronize(); // its bucket would read p0 where it was: every rank stops
    FAIL("expected an error");
  } catch (const ddp::error& e) {
    CHECK(std::string(e.what()).find(
              "'p0' was replaced by new storage after this step's first bucket started") !=
          std::string::npos);
  }
}

TEST_CASE("a DDP whose process group is gone fails with ddp::error, not a crash") {
  owned_model m({8}, layout::separate);
  auto h = std::make_unique<fresh_group_holder>();
  ddp::distributed_data_parallel dp(m.model, h->pg);
  h.reset(); // the group goes first: the declaration order a user gets wrong
  for (int call = 0; call < 3; ++call) {
    try {
      if (call == 0) dp.synchronize();
      if (call == 1) dp.mark_grad_ready(0);
      if (call == 2) dp.sync_buffers();
      FAIL("used a destroyed process group");
    } catch (const ddp::error& e) {
      CHECK(std::string(e.what()).find("process_group was destroyed") != std::string::npos);
      CHECK(e.rank() == group().rank());
    }
  }
}

TEST_CASE("check_finite names the rank and parameter that produced a NaN, on every rank, before it spreads") {
  if (group().size() == 1) return;
  auto h = std::make_unique<fresh_group_holder>();
  auto& pg = h->pg;
  owned_model m({100, 50}, layout::separate);
  ddp::ddp_options o;
  o.check_finite = true;
  ddp::distributed_data_parallel dp(m.model, pg, o);
  m.fill(pg.rank());
  dp.synchronize(); // finite: no error
  m.fill(pg.rank());
  if (pg.rank() == 1) m.grads[0][42] = std::numeric_limits<float>::quiet_NaN();
  try {
    dp.synchronize();
    FAIL("the NaN went into the reduction");
  } catch (const ddp::error& e) {
    const std::string what = e.what();
    CAPTURE(what);
    CHECK(e.kind() == ddp::error_kind::data);
    CHECK(e.rank() == 1);
    if (pg.rank() == 1) {
      CHECK(what.find(
                "rank 1: the gradient of parameter 'p0' holds a NaN or Inf (element 42 of 100) at step 2") !=
            std::string::npos);
    } else {
      CHECK(what.find("rank 1's gradient of parameter 'p0' holds a NaN or Inf at step 2") !=
            std::string::npos);
    }
  }
  // No rank's gradients took the NaN in.
  if (pg.rank() != 1)
    for (float g : m.grads[0])
      CHECK(std::isfinite(g));
}

TEST_CASE("DDP_DEBUG=DETAIL names the parameter of ranks whose models drifted apart") {
  if (group().size() == 1 || ddp::detail::debug() < ddp::detail::debug_level::detail) return;
  auto h = std::make_unique<fresh_group_holder>();
  auto& pg = h->pg;
  owned_model m({64, 8}, layout::separate);
  ddp::distributed_data_parallel dp(m.model, pg);
  auto sgd = [&] {
    for (std::size_t i = 0; i < m.values.size(); ++i)
      for (std::size_t k = 0; k < m.values[i].size(); ++k)
        m.values[i][k] -= 0.01f * m.grads[i][k];
  };
  try {
    for (int step = 0; step < 3; ++step) {
      m.fill(pg.rank());
      if (!(pg.rank() == 1 && step == 0)) dp.synchronize(); // rank 1 forgets its first
      sgd();
    }
    FAIL("the drift went unnoticed");
  } catch (const ddp::error& e) {
    const std::string what = e.what();
    CAPTURE(what);
    CHECK(e.kind() == ddp::error_kind::mismatch);
    CHECK(e.rank() == 1);
    CHECK(what.find("parameter 'p0' differs between rank 0 and rank 1") != std::string::npos);
  }
}

TEST_CASE("a peer that finished normally is reported as finished, naming the call still waiting") {
  if (group().size() == 1) return;
  auto h = std::make_unique<fresh_group_holder>();
  const int rank = h->pg.rank();
  owned_model m({300, 5}, layout::separate);
  {
    ddp::distributed_data_parallel dp(m.model, h->pg);
    m.fill(rank);
    dp.synchronize();
    if (rank != 0) {
      // This rank is done; rank 0 calls synchronize() once more (with new gradients).
    } else {
      m.fill(rank);
      try {
        dp.synchronize();
        FAIL("rank 0's extra synchronize() completed");
      } catch (const ddp::error& e) {
        const std::string what = e.what();
        CAPTURE(what);
        CHECK(e.kind() == ddp::error_kind::peer_lost);
        // At 3 or more ranks, whichever finished peer rank 0 looks at first is named.
        CHECK(what.find("rank " + std::to_string(e.rank()) +
                        " left: its process group ended without an exception in flight") !=
              std::string::npos);
        CHECK(what.find("while rank 0 was still in this call") != std::string::npos);
        CHECK(what.find("distributed_data_parallel::synchronize, step 2, bucket 0 of 1") !=
              std::string::npos);
        CHECK(e.rank() >= 1);
      }
    }
  }
  h.reset();
  group().barrier(); // every rank's case is over before the next
}

TEST_CASE("uneven inputs: after join(), the next epoch's steps are in step on every rank") {
  auto& pg = group();
  owned_model m({500, 7}, layout::separate);
  ddp::distributed_data_parallel dp(m.model, pg, {.uneven_inputs = true});
  for (int epoch = 0; epoch < 3; ++epoch) {
    for (int step = 0; step < 2 + pg.rank(); ++step) { // rank r has 2 + r batches
      m.fill(pg.rank());
      dp.synchronize();
      if (step == 0) m.check(mean_factor(pg.size())); // every rank is still training
    }
    dp.join(); // the ranks that ran out shadow the others' steps, which count for them too
  }
}
