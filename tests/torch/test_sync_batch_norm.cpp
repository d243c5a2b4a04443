// ddp::torch::SyncBatchNorm at world sizes 2 and 3, with uneven per-rank
// batches: forward outputs, input gradients, the ranks' averaged weight and
// bias gradients, running statistics and the eval forward equal LibTorch's
// plain BatchNorm run in one process on the ranks' batches concatenated,
// within 1e-5 relative (to the largest magnitude); convert_sync_batchnorm on
// a nested Sequential; errors that name the rank and say what to do.
#include "../dist/group.hpp"

#include <ddp/torch.hpp>

#include <doctest/doctest.h>
#include <torch/torch.h> // modules, optimizers and data loaders: what a user's file includes

#include <algorithm>
#include <cstdint>
#include <vector>

using ddp_test::group;

namespace {

/// Rank r's share of a batch: 2 + r samples (uneven), at its offset in the concatenation.
std::int64_t share(int r) { return 2 + r; }
std::int64_t offset(int r) {
  std::int64_t o = 0;
  for (int q = 0; q < r; ++q)
    o += share(q);
  return o;
}

/// The largest difference seen, printed by the last test case (the figure docs/libtorch.md quotes).
double worst = 0.0;

double rel_diff(const torch::Tensor& got, const torch::Tensor& want) {
  const double scale = std::max(1e-6, want.abs().max().item<double>());
  const double d = (got.to(torch::kFloat64) - want.to(torch::kFloat64)).abs().max().item<double>() / scale;
  worst = std::max(worst, d);
  return d;
}

/// Runs `steps` training steps of `ref` (one process, whole batch) and `sync`
/// (this rank's share) on the same data, comparing every step; then eval.
template <class BN>
void compare(BN ref, ddp::torch::SyncBatchNorm sync, std::vector<std::int64_t> sample_shape, int steps) {
  auto& pg = group();
  const int w = pg.size(), r = pg.rank();
  const std::int64_t total = offset(w);
  {
    torch::NoGradGuard no_grad;
    if (ref->options.affine()) { // not ones and zeros: the parameters' gradients must matter
      torch::manual_seed(5);
      ref->weight.copy_(torch::rand_like(ref->weight) + 0.5);
      ref->bias.copy_(torch::randn_like(ref->bias));
      sync->weight.copy_(ref->weight);
      sync->bias.copy_(ref->bias);
    }
  }
  for (int step = 0; step < steps; ++step) {
    CAPTURE(step);
    std::vector<std::int64_t> shape{total};
    shape.insert(shape.end(), sample_shape.begin(), sample_shape.end());
    torch::manual_seed(100 + static_cast<std::uint64_t>(step));
    auto x = torch::randn(shape) * 3.0 + 1.5;
    auto g = torch::randn(shape);
    auto xr = x.clone().requires_grad_(true);
    auto yr = ref->forward(xr);
    (yr * g).sum().backward();

    auto xs = x.narrow(0, offset(r), share(r)).clone().requires_grad_(true);
    auto ys = sync->forward(xs);
    (ys * g.narrow(0, offset(r), share(r))).sum().backward();

    CHECK(rel_diff(ys, yr.narrow(0, offset(r), share(r))) < 1e-5);
    CHECK(rel_diff(xs.grad(), xr.grad().narrow(0, offset(r), share(r))) < 1e-5);
    if (ref->options.affine()) {
      // Each rank's weight gradient is its share of the sum; DDP averages, so W times the average is the
      // whole.
      const std::vector<torch::Tensor> mine{sync->weight.grad(), sync->bias.grad()};
      const std::vector<torch::Tensor> whole{ref->weight.grad(), ref->bias.grad()};
      for (std::size_t i = 0; i < mine.size(); ++i) {
        auto avg = mine[i].clone();
        pg.all_reduce(std::span<float>(avg.data_ptr<float>(), static_cast<std::size_t>(avg.numel())),
                      ddp::op::avg);
        CHECK(rel_diff(avg * w, whole[i]) < 1e-5);
        mine[i].zero_();
        whole[i].zero_();
      }
    }
    if (ref->options.track_running_stats()) {
      CHECK(rel_diff(sync->running_mean, ref->running_mean) < 1e-5);
      CHECK(rel_diff(sync->running_var, ref->running_var) < 1e-5);
      CHECK(sync->num_batches_tracked.template item<std::int64_t>() ==
            ref->num_batches_tracked.template item<std::int64_t>());
      // Identical on every rank, bit for bit: rank 0's copy equals mine.
      auto rm = sync->running_mean.clone(), rv = sync->running_var.clone();
      pg.broadcast(std::span<float>(rm.data_ptr<float>(), static_cast<std::size_t>(rm.numel())), 0);
      pg.broadcast(std::span<float>(rv.data_ptr<float>(), static_cast<std::size_t>(rv.numel())), 0);
      CHECK(torch::equal(rm, sync->running_mean));
      CHECK(torch::equal(rv, sync->running_var));
    }
  }
  // Eval: running statistics (or, without them, the rank's own batch, as BatchNorm does).
  ref->eval();
  sync->eval();
  std::vector<std::int64_t> shape{share(r)};
  shape.insert(shape.end(), sample_shape.begin(), sample_shape.end());
  torch::manual_seed(999);
  auto x = torch::randn(shape);
  torch::NoGradGuard no_grad;
  CHECK(rel_diff(sync->forward(x), ref->forward(x)) < 1e-5);
}

} // namespace

TEST_CASE("SyncBatchNorm as BatchNorm2d equals one process on the whole batch") {
  compare(torch::nn::BatchNorm2d(4), ddp::torch::SyncBatchNorm(torch::nn::BatchNormOptions(4), group()),
          {4, 3, 5}, 3);
}

TEST_CASE("SyncBatchNorm as BatchNorm1d over (N, C) and (N, C, L), cumulative momentum") {
  auto opt = torch::nn::BatchNormOptions(3).momentum(c10::nullopt).eps(1e-3);
  compare(torch::nn::BatchNorm1d(opt), ddp::torch::SyncBatchNorm(opt, group()), {3}, 3);
  compare(torch::nn::BatchNorm1d(opt), ddp::torch::SyncBatchNorm(opt, group()), {3, 7}, 2);
}

TEST_CASE("SyncBatchNorm as BatchNorm3d without affine, and without running statistics") {
  auto plain = torch::nn::BatchNormOptions(2).affine(false);
  compare(torch::nn::BatchNorm3d(plain), ddp::torch::SyncBatchNorm(plain, group()), {2, 2, 3, 2}, 2);
  auto untracked = torch::nn::BatchNormOptions(2).track_running_stats(false);
  compare(torch::nn::BatchNorm3d(untracked), ddp::torch::SyncBatchNorm(untracked, group()), {2, 3, 2, 2}, 2);
}

TEST_CASE("SyncBatchNorm with an empty batch on rank 1") {
  auto& pg = group();
  const int w = pg.size(), r = pg.rank();
  auto n_of = [](int q) { return std::int64_t{q == 1 ? 0 : 3}; };
  std::int64_t total = 0, at = 0;
  for (int q = 0; q < w; ++q) {
    at += q < r ? n_of(q) : 0;
    total += n_of(q);
  }
  torch::nn::BatchNorm1d ref(4);
  ddp::torch::SyncBatchNorm sync(torch::nn::BatchNormOptions(4), pg);
  torch::manual_seed(77);
  auto x = torch::randn({total, 4, 2});
  auto g = torch::randn({total, 4, 2});
  auto xr = x.clone().requires_grad_(true);
  auto yr = ref->forward(xr);
  (yr * g).sum().backward();
  auto xs = x.narrow(0, at, n_of(r)).clone().requires_grad_(true);
  auto ys = sync->forward(xs);
  (ys * g.narrow(0, at, n_of(r))).sum().backward();
  REQUIRE(ys.size(0) == n_of(r));
  if (n_of(r) > 0) {
    CHECK(rel_diff(ys, yr.narrow(0, at, n_of(r))) < 1e-5);
    CHECK(rel_diff(xs.grad(), xr.grad().narrow(0, at, n_of(r))) < 1e-5);
  }
  CHECK(rel_diff(sync->running_mean, ref->running_mean) < 1e-5);
  CHECK(rel_diff(sync->running_var, ref->running_var) < 1e-5);
}

TEST_CASE("convert_sync_batchnorm swaps a Sequential's BatchNorms, keeping their state") {
  auto& pg = group();
  const int w = pg.size(), r = pg.rank();
  torch::manual_seed(3);
  torch::nn::Sequential net(torch::nn::Conv2d(torch::nn::Conv2dOptions(2, 4, 3).padding(1)),
                            torch::nn::BatchNorm2d(4), torch::nn::ReLU(), torch::nn::Flatten(),
                            torch::nn::Linear(4 * 4 * 4, 5), torch::nn::BatchNorm1d(5));
  {
    torch::NoGradGuard no_grad;
    for (auto& b : net->buffers())
      if (b.is_floating_point())
        b.add_(0.25); // running statistics that are not the defaults, to see them carried over
  }
  auto sync = ddp::torch::convert_sync_batchnorm(net, pg);
  REQUIRE(sync->size() == net->size());
  CHECK(sync[1]->as<ddp::torch::SyncBatchNorm>() != nullptr);
  CHECK(sync[5]->as<ddp::torch::SyncBatchNorm>() != nullptr);
  CHECK(sync[2]->as<torch::nn::ReLU>() != nullptr);
  CHECK(sync[0].get() == net[0].get()); // other modules are shared, not copied
  CHECK(net->named_parameters().keys() == sync->named_parameters().keys());
  CHECK(net->named_buffers().keys() == sync->named_buffers().keys());
  for (const auto& b : net->named_buffers())
    CHECK(torch::equal(b.value(), sync->named_buffers()[b.key()]));

  torch::manual_seed(11);
  auto x = torch::randn({offset(w), 2, 4, 4});
  auto yr = net->forward(x);
  auto ys = sync->forward(x.narrow(0, offset(r), share(r)));
  CHECK(rel_diff(ys, yr.narrow(0, offset(r), share(r))) < 1e-5);
}

namespace {
/// Conv, a BatchNorm-like layer, ReLU, Linear: the module under test (BN = SyncBatchNorm) or the reference.
template <class BN> struct TinyNetImpl : torch::nn::Module {
  explicit TinyNetImpl(BN norm) : bn(std::move(norm)) {
    torch::manual_seed(21);
    conv = register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(2, 3, 3).padding(1)));
    register_module("bn", bn);
    fc = register_module("fc", torch::nn::Linear(3 * 4 * 4, 2));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    return fc->forward(torch::relu(bn->forward(conv->forward(x))).flatten(1));
  }
  torch::nn::Conv2d conv{nullptr};
  BN bn;
  torch::nn::Linear fc{nullptr};
};
} // namespace

TEST_CASE("SyncBatchNorm under distributed_data_parallel trains as BatchNorm on the whole batch") {
  auto& pg = group();
  const int w = pg.size(), r = pg.rank();
  auto ref = std::make_shared<TinyNetImpl<torch::nn::BatchNorm2d>>(torch::nn::BatchNorm2d(3));
  auto net = std::make_shared<TinyNetImpl<ddp::torch::SyncBatchNorm>>(
      ddp::torch::SyncBatchNorm(torch::nn::BatchNormOptions(3), pg));
  // Its backward's all-reduce and the buckets autograd launches share the group's one queue.
  ddp::distributed_data_parallel dp(*net, pg);
  torch::optim::SGD opt_ref(ref->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  const std::int64_t total = offset(w);
  for (int step = 0; step < 3; ++step) {
    CAPTURE(step);
    torch::manual_seed(300 + static_cast<std::uint64_t>(step));
    auto x = torch::randn({total, 2, 4, 4});
    auto y = torch::randint(0, 2, {total});
    opt_ref.zero_grad();
    torch::nn::functional::cross_entropy(ref->forward(x), y).backward();
    opt_ref.step();
    // The whole batch's mean loss: this rank's sum over N, times W for DDP's mean over ranks.
    opt.zero_grad();
    auto out = net->forward(x.narrow(0, offset(r), share(r)));
    auto loss = torch::nn::functional::cross_entropy(
                    out, y.narrow(0, offset(r), share(r)),
                    torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum)) *
                (static_cast<double>(w) / static_cast<double>(total));
    loss.backward();
    dp.synchronize();
    opt.step();
    auto pr = ref->named_parameters(), pn = net->named_parameters();
    for (const auto& p : pr) {
      CAPTURE(p.key());
      CHECK(rel_diff(pn[p.key()], p.value()) < 1e-5);
    }
    CHECK(rel_diff(net->bn->running_mean, ref->bn->running_mean) < 1e-5);
    CHECK(rel_diff(net->bn->running_var, ref->bn->running_var) < 1e-5);
  }
}

TEST_CASE("SyncBatchNorm's errors name the rank and say what to do") {
  auto& pg = group();
  ddp::torch::SyncBatchNorm bn(torch::nn::BatchNormOptions(3), pg);
  CHECK_THROWS_WITH_AS(bn->forward(torch::randn({4, 5})), doctest::Contains("input has 5 channels"),
                       ddp::error);
  CHECK_THROWS_WITH_AS(bn->forward(torch::randn({4})), doctest::Contains("expected a 2D to 5D input"),
                       ddp::error);
  // One value per channel over all ranks: rank 0 has one sample, the others none.
  auto one = torch::randn({pg.rank() == 0 ? 1 : 0, 3});
  CHECK_THROWS_WITH_AS(bn->forward(one), doctest::Contains("training needs more than 1"), ddp::error);
  // The group is still in step: a good forward and backward run everywhere.
  auto x = torch::randn({2, 3}).requires_grad_(true);
  bn->forward(x).sum().backward();
  CHECK(x.grad().defined());
  if (pg.rank() == 0) MESSAGE("largest relative difference from BatchNorm on the whole batch: " << worst);
}
