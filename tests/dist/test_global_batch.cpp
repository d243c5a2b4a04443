// A global batch fixed across world sizes (ddp::global_batches) with uneven shares
// reduced to the exact sample-weighted mean (distributed_data_parallel::set_samples):
// at every world size (1..4, a global batch of 7 never divisible by it, an epoch's last
// batch of 2 that leaves ranks without a sample) the reduced gradients equal
// single-process training on the concatenated global batch, step after step.
#include "../support/mlp.hpp"
#include "group.hpp"

#include <ddp/global_batches.hpp>

#include <doctest/doctest.h>

using ddp_test::group;
using ddp_test::mlp;

namespace {

const std::vector<int> dims{6, 16, 12, 3};
constexpr std::size_t samples = 23, global = 7; // steps per epoch: 7, 7, 7, 2

std::vector<double> flat_grads(const mlp<float>& m) {
  std::vector<double> out;
  for (std::size_t l = 0; l < m.w.size(); ++l) {
    for (Eigen::Index i = 0; i < m.dw[l].size(); ++i)
      out.push_back(static_cast<double>(m.dw[l].data()[i]));
    for (Eigen::Index i = 0; i < m.db[l].size(); ++i)
      out.push_back(static_cast<double>(m.db[l].data()[i]));
  }
  return out;
}

/// Columns `idx` of a.
mlp<float>::mat columns(const mlp<float>::mat& a, std::span<const std::int64_t> idx) {
  mlp<float>::mat out(a.rows(), static_cast<Eigen::Index>(idx.size()));
  for (std::size_t j = 0; j < idx.size(); ++j)
    out.col(static_cast<Eigen::Index>(j)) = a.col(static_cast<Eigen::Index>(idx[j]));
  return out;
}

/// Trains `steps` global steps from `first` with DDP (this rank's share, set_samples) and a
/// single-process reference (the whole global batch) side by side; after every step the
/// reduced gradients must equal the reference's. Returns the worst relative difference.
template <class Reduction, class Bucketing = ddp::bucketing::size_capped<>>
double train_against_reference(bool arena, std::uint64_t steps, float lr) {
  auto& pg = group();
  auto [x, y] = ddp_test::make_batch<float>(dims.front(), dims.back(), static_cast<int>(samples), 11u);
  mlp<float> net(dims, 5u, arena), ref(dims, 5u, false);
  ddp::distributed_data_parallel<mlp<float>, ddp::gloo, Bucketing, Reduction> dp(net, pg);
  ddp::distributed_sampler<ddp::sampling::shuffled> sampler(samples, pg, {.seed = 9});
  ddp::distributed_sampler<ddp::sampling::shuffled> whole(samples, 1, 0, {.seed = 9});
  ddp::global_batches view(sampler, global), whole_view(whole, global);
  double worst = 0;
  for (std::uint64_t s = 0; s < steps; ++s) {
    const auto b = view.at(s);
    net.zero_grad();
    dp.set_samples(b.local_samples(), b.global_samples());
    if (b.local_samples() > 0) // a rank without samples this step contributes nothing
      net.train_step(columns(x, b.indices), columns(y, b.indices), [&](std::size_t l) {
        dp.mark_grad_ready(net.dw[l]);
        dp.mark_grad_ready(net.db[l]);
      });
    dp.synchronize();
    const auto all = whole_view.at(s);
    REQUIRE(all.indices.size() == b.global_samples());
    ref.zero_grad();
    ref.train_step(columns(x, all.indices), columns(y, all.indices));
    worst = std::max(worst, ddp_test::relative_difference(flat_grads(net), flat_grads(ref)));
    net.sgd(lr);
    ref.sgd(lr);
  }
  worst = std::max(worst, ddp_test::relative_difference(net.flat(), ref.flat()));
  return worst;
}

} // namespace

TEST_CASE("set_samples: the sample-weighted mean equals single-process training on the global batch") {
  // Float summation order only: 1e-5 relative leaves two orders of magnitude to spare.
  SUBCASE("separate gradient allocations, size_capped") {
    CHECK(train_against_reference<ddp::reduction::mean>(false, 8, 0.1f) < 1e-5);
  }
  SUBCASE("gradients in an arena: in-place buckets") {
    CHECK(train_against_reference<ddp::reduction::mean>(true, 8, 0.1f) < 1e-5);
  }
  SUBCASE("per_tensor buckets") {
    CHECK(train_against_reference<ddp::reduction::mean, ddp::bucketing::per_tensor>(false, 8, 0.1f) < 1e-5);
  }
  SUBCASE("reduction::sum gives the same weighted mean") {
    CHECK(train_against_reference<ddp::reduction::sum>(false, 8, 0.1f) < 1e-5);
  }
}

TEST_CASE("set_samples: refused after a bucket left, and for counts that cannot be a step's") {
  auto& pg = group();
  mlp<float> net(dims, 5u, false);
  ddp::distributed_data_parallel<mlp<float>, ddp::gloo, ddp::bucketing::per_tensor> dp(net, pg);
  CHECK_THROWS_WITH_AS(dp.set_samples(5, 3), doctest::Contains("global sample count must be at least 1"),
                       ddp::error);
  const std::string named = "rank " + std::to_string(pg.rank()) + ": set_samples(0, 0)";
  CHECK_THROWS_WITH_AS(dp.set_samples(0, 0), doctest::Contains(named.c_str()), ddp::error);
  net.zero_grad();
  dp.mark_grad_ready(net.db.back()); // the last parameter: per_tensor's first bucket leaves now
  if (dp.buckets_launched() > 0)
    CHECK_THROWS_WITH_AS(dp.set_samples(1, 2), doctest::Contains("call it before backward"), ddp::error);
  dp.synchronize();
  // The weight of one step does not carry over to the next: a plain mean again.
  for (auto& g : net.dw)
    g.setConstant(static_cast<float>(pg.rank() + 1));
  for (auto& g : net.db)
    g.setConstant(static_cast<float>(pg.rank() + 1));
  dp.set_samples(1, static_cast<std::size_t>(pg.size()));
  dp.synchronize();
  CHECK(net.dw[0](0, 0) == doctest::Approx((pg.size() + 1) / 2.0));
  for (auto& g : net.dw)
    g.setConstant(static_cast<float>(pg.rank() + 1));
  for (auto& g : net.db)
    g.setConstant(static_cast<float>(pg.rank() + 1));
  // Rank 0 alone holds every sample: its gradient is the result.
  dp.set_samples(pg.rank() == 0 ? 4 : 0, 4);
  dp.synchronize();
  CHECK(net.dw[0](0, 0) == doctest::Approx(1.0));
  CHECK(net.db[2](1, 0) == doctest::Approx(1.0));
}
