// LibTorch modules under distributed_data_parallel, at world sizes 1..3:
// against one process training on the whole batch, with autograd marking the
// gradients (no mark_grad_ready calls anywhere here).
#include "../dist/group.hpp"

#include <ddp/sharded_data_parallel.hpp>
#include <ddp/torch.hpp>

#include <doctest/doctest.h>
#include <torch/torch.h> // modules, optimizers and data loaders: what a user's file includes

#include <cmath>
#include <vector>

using ddp_test::group;

namespace {

constexpr int per_rank = 4;
constexpr int steps = 5;

struct NetImpl : torch::nn::Module {
  NetImpl() {
    conv = register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 4, 3).padding(1)));
    fc1 = register_module("fc1", torch::nn::Linear(4 * 4 * 4, 16));
    head_a = register_module("head_a", torch::nn::Linear(16, 3));
    head_b = register_module("head_b", torch::nn::Linear(16, 3));
  }
  torch::Tensor trunk(const torch::Tensor& x) {
    auto h = torch::max_pool2d(torch::relu(conv->forward(x)), 2);
    return torch::relu(fc1->forward(h.flatten(1)));
  }
  /// head_b only where `branch` says: a parameter that gets no gradient.
  torch::Tensor forward(const torch::Tensor& x, bool branch = false) {
    auto h = trunk(x);
    return branch ? head_b->forward(h) : head_a->forward(h);
  }
  torch::nn::Conv2d conv{nullptr};
  torch::nn::Linear fc1{nullptr}, head_a{nullptr}, head_b{nullptr};
};
TORCH_MODULE(Net);

/// A fresh model from `seed`: every rank but 0 starts elsewhere, so the
/// constructor must broadcast rank 0's parameters.
Net make_net(std::uint64_t seed) {
  torch::manual_seed(seed);
  return Net();
}

struct batch {
  torch::Tensor x, y;
};
batch global_batch(int step, int world) {
  torch::manual_seed(1000 + static_cast<std::uint64_t>(step));
  return {torch::randn({per_rank * world, 1, 8, 8}), torch::randint(0, 3, {per_rank * world})};
}
batch shard(const batch& b, int rank) {
  return {b.x.narrow(0, rank * per_rank, per_rank), b.y.narrow(0, rank * per_rank, per_rank)};
}

double max_rel_diff(Net& a, Net& b) {
  double worst = 0;
  auto pa = a->parameters(), pb = b->parameters();
  for (std::size_t i = 0; i < pa.size(); ++i) {
    const double scale = std::max(1e-3, pb[i].abs().max().item<double>());
    worst = std::max(worst, (pa[i] - pb[i]).abs().max().item<double>() / scale);
  }
  return worst;
}

/// Which head rank r uses at `step`: ranks differ, and some steps leave a
/// head unused on every rank.
bool branch_of(int rank, int step, bool unused_branch) { return unused_branch && (rank + step) % 3 == 0; }

enum class zeroing { optimizer, set_to_none };

template <class Bucketing = ddp::bucketing::size_capped<>>
double train_and_compare(bool unused_branch, zeroing z) {
  auto& pg = group();
  const int R = pg.size(), r = pg.rank();
  Net reference = make_net(7), local = make_net(r == 0 ? 7 : 7 + 100 * static_cast<std::uint64_t>(r));
  ddp::distributed_data_parallel<NetImpl, ddp::gloo, Bucketing> dp(*local, pg);
  torch::optim::SGD ref_opt(reference->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  torch::optim::SGD opt(local->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  for (int step = 0; step < steps; ++step) {
    auto whole = global_batch(step, R);
    // The oracle: the mean over ranks of each rank's mean loss, on one process.
    ref_opt.zero_grad();
    torch::Tensor total = torch::zeros({});
    for (int q = 0; q < R; ++q) {
      auto s = shard(whole, q);
      total = total + torch::nn::functional::cross_entropy(
                          reference->forward(s.x, branch_of(q, step, unused_branch)), s.y);
    }
    (total / R).backward();
    ref_opt.step();

    if (z == zeroing::optimizer)
      opt.zero_grad();
    else
      local->zero_grad(/*set_to_none=*/true);
    auto s = shard(whole, r);
    torch::nn::functional::cross_entropy(local->forward(s.x, branch_of(r, step, unused_branch)), s.y)
        .backward();
    dp.synchronize();
    opt.step();
  }
  return max_rel_diff(local, reference);
}

} // namespace

TEST_CASE("R ranks equal one process on the whole batch: size_capped, per_tensor, single_buffer") {
  CHECK(train_and_compare(false, zeroing::optimizer) < 1e-5);
  CHECK(train_and_compare<ddp::bucketing::per_tensor>(false, zeroing::optimizer) < 1e-5);
  CHECK(train_and_compare<ddp::bucketing::single_buffer>(false, zeroing::optimizer) < 1e-5);
}

TEST_CASE("an unused branch counts as zeros, as find_unused_parameters does") {
  CHECK(train_and_compare(true, zeroing::optimizer) < 1e-5);
}

TEST_CASE("zero_grad(set_to_none): autograd's new gradients are followed into the views") {
  CHECK(train_and_compare(true, zeroing::set_to_none) < 1e-5);
  auto net = make_net(3);
  ddp::distributed_data_parallel dp(*net, group());
  auto views = [&] {
    std::vector<void*> out;
    for (auto& p : net->parameters())
      out.push_back(p.grad().data_ptr());
    return out;
  };
  const auto before = views();
  for (int step = 0; step < 2; ++step) {
    net->zero_grad(true);
    auto s = shard(global_batch(step, group().size()), group().rank());
    torch::nn::functional::cross_entropy(net->forward(s.x), s.y).backward();
    dp.synchronize();
    CHECK(views() == before);
  }
}

TEST_CASE("gradients are views into contiguous storage: every bucket reduces in place") {
  auto net = make_net(3);
  ddp::distributed_data_parallel dp(*net, group());
  for (auto& b : dp.buckets())
    CHECK(b.path == ddp::bucket_path::in_place);
}

TEST_CASE("buckets start while backward still runs") {
  auto net = make_net(3);
  ddp::distributed_data_parallel<NetImpl, ddp::gloo, ddp::bucketing::per_tensor> dp(*net, group());
  auto s = shard(global_batch(0, group().size()), group().rank());
  // The gradient of the trunk's output arrives after head_b's and before the
  // trunk's own: by then head_b's buckets (the first two, in reverse
  // registration order) must be on the wire. head_a is unused here, and buckets
  // launch in order, so its buckets and the trunk's wait for synchronize().
  std::size_t launched_mid_backward = 0;
  auto h = net->trunk(s.x);
  h.register_hook([&](torch::Tensor g) {
    launched_mid_backward = dp.buckets_launched();
    return g;
  });
  torch::nn::functional::cross_entropy(net->head_b->forward(h), s.y).backward();
  CHECK(launched_mid_backward == 2);
  dp.synchronize();
}

TEST_CASE("no_sync accumulates locally; the next synchronize averages the sum") {
  auto& pg = group();
  const int R = pg.size(), r = pg.rank();
  Net reference = make_net(5), local = make_net(5);
  ddp::distributed_data_parallel dp(*local, pg);
  reference->zero_grad();
  local->zero_grad();
  for (int micro = 0; micro < 2; ++micro) {
    auto whole = global_batch(micro, R);
    for (int q = 0; q < R; ++q) {
      auto s = shard(whole, q);
      (torch::nn::functional::cross_entropy(reference->forward(s.x, micro == 1), s.y) / R).backward();
    }
    auto s = shard(whole, r);
    auto loss = torch::nn::functional::cross_entropy(local->forward(s.x, micro == 1), s.y);
    if (micro == 0) {
      auto guard = dp.no_sync();
      loss.backward();
    } else {
      loss.backward();
    }
  }
  dp.synchronize();
  auto pr = reference->parameters(), pl = local->parameters();
  for (std::size_t i = 0; i < pr.size(); ++i)
    CHECK(torch::allclose(pl[i].grad(), pr[i].grad(), 1e-5, 1e-6));
}

TEST_CASE("BatchNorm's running statistics come from rank 0") {
  auto& pg = group();
  torch::manual_seed(11);
  auto bn = torch::nn::BatchNorm1d(4);
  // Different statistics on every rank before the constructor.
  bn->running_mean.fill_(static_cast<float>(pg.rank()));
  ddp::distributed_data_parallel dp(*bn, pg);
  CHECK(bn->running_mean.eq(0.0f).all().item<bool>());
  torch::manual_seed(20 + static_cast<std::uint64_t>(pg.rank()));
  bn->forward(torch::randn({8, 4}) + pg.rank()).sum().backward();
  dp.synchronize(); // broadcast_buffers: rank 0's statistics everywhere
  std::vector<float> mine(bn->running_mean.data_ptr<float>(), bn->running_mean.data_ptr<float>() + 4);
  std::vector<float> all(4 * static_cast<std::size_t>(pg.size()));
  pg.all_gather(mine, all);
  for (std::size_t i = 0; i < all.size(); ++i)
    CHECK(all[i] == all[i % 4]);
  CHECK(bn->num_batches_tracked.item<std::int64_t>() == 1);
}

TEST_CASE("float64 and bfloat16 parameters reduce in their own dtype") {
  for (auto type : {torch::kFloat64, torch::kBFloat16}) {
    torch::manual_seed(2);
    auto lin = torch::nn::Linear(5, 2);
    lin->to(type);
    ddp::distributed_data_parallel dp(*lin, group());
    lin->zero_grad();
    // Each rank's gradient is its rank + 1: the average is (R + 1) / 2.
    (lin->weight.sum() * (group().rank() + 1)).backward();
    dp.synchronize();
    const double expect = (group().size() + 1) / 2.0;
    CHECK(lin->weight.grad().to(torch::kFloat64).sub(expect).abs().max().item<double>() < 1e-2);
    for (auto& b : dp.buckets())
      CHECK(b.param_type == (type == torch::kFloat64 ? ddp::dtype::f64 : ddp::dtype::bf16));
  }
}

TEST_CASE("a complex parameter is refused by name") {
  struct Odd : torch::nn::Module {
    Odd() { w = register_parameter("w", torch::zeros({3}, torch::kComplexFloat)); }
    torch::Tensor w;
  } odd;
  try {
    ddp::distributed_data_parallel dp(odd, group());
    FAIL("complex parameter accepted");
  } catch (const ddp::error& e) {
    const std::string what = e.what();
    CHECK(what.find("parameter 'w' is ComplexFloat") != std::string::npos);
    CHECK(what.find("float32, float64, float16 and bfloat16") != std::string::npos);
  }
}

TEST_CASE("a gradient replaced after backward is refused, not dropped") {
  auto net = make_net(3);
  ddp::distributed_data_parallel dp(*net, group());
  auto s = shard(global_batch(0, group().size()), group().rank());
  torch::nn::functional::cross_entropy(net->forward(s.x), s.y).backward();
  net->fc1->weight.mutable_grad() = net->fc1->weight.grad() * 2;
  CHECK_THROWS_WITH_AS(dp.synchronize(), doctest::Contains("'fc1.weight': its gradient was replaced"),
                       ddp::error);
}

namespace {
/// Hands back the indices it is asked for, so a loader's batches show the sampler's order.
struct index_data : torch::data::datasets::BatchDataset<index_data, std::vector<std::size_t>> {
  std::vector<std::size_t> get_batch(c10::ArrayRef<std::size_t> rows) override { return rows.vec(); }
  c10::optional<std::size_t> size() const override { return 103; }
};
} // namespace

TEST_CASE("torch::data loader with ddp::torch::distributed_sampler: ddp's indices, epochs, resume") {
  auto& pg = group();
  ddp::torch::distributed_sampler<> sampler(103, pg, {.seed = 9});
  auto loader = torch::data::make_data_loader(index_data{}, sampler, torch::data::DataLoaderOptions(10));
  ddp::distributed_sampler<> plain(103, pg, {.seed = 9});
  auto visit = [&] {
    std::vector<std::int64_t> seen;
    for (auto& b : *loader)
      for (auto i : b)
        seen.push_back(static_cast<std::int64_t>(i));
    return seen;
  };
  for (std::uint64_t epoch : {0u, 1u}) {
    sampler.set_epoch(epoch); // the loader holds a copy: this one steers it
    plain.set_epoch(epoch);
    auto expect = std::vector<std::int64_t>(plain.indices().begin(), plain.indices().end());
    CHECK(visit() == expect);
    sampler.resume_at(20); // mid-epoch: the loader's next pass starts at the 21st index
    CHECK(visit() == std::vector<std::int64_t>(expect.begin() + 20, expect.end()));
  }
  // save/load carry the epoch and the position.
  sampler.set_epoch(3);
  sampler.resume_at(30);
  torch::serialize::OutputArchive out;
  sampler.save(out);
  std::ostringstream bytes;
  out.save_to(bytes);
  ddp::torch::distributed_sampler<> restored(103, pg, {.seed = 9});
  torch::serialize::InputArchive in;
  std::istringstream is(bytes.str());
  in.load_from(is);
  restored.load(in);
  CHECK(restored.epoch() == 3);
  CHECK(restored.position() == 30);
  CHECK_THROWS_WITH_AS(restored.resume_at(1000), doctest::Contains("is past this rank's"), ddp::error);
}

TEST_CASE("sharded_data_parallel with ddp::optim follows torch::optim's Adam and SGD") {
  auto& pg = group();
  const int R = pg.size(), r = pg.rank();
  for (bool adam : {true, false}) {
    Net whole = make_net(21), sharded = make_net(21);
    ddp::distributed_data_parallel dp(*whole, pg);
    ddp::sharded_data_parallel sdp(*sharded, pg);
    std::unique_ptr<torch::optim::Optimizer> reference;
    if (adam)
      reference = std::make_unique<torch::optim::Adam>(
          whole->parameters(),
          torch::optim::AdamOptions(1e-2).betas({0.9, 0.99}).eps(1e-6).weight_decay(1e-3));
    else
      reference = std::make_unique<torch::optim::SGD>(
          whole->parameters(),
          torch::optim::SGDOptions(0.05).momentum(0.9).nesterov(true).weight_decay(1e-3));
    ddp::optim::adam a(sdp, {.lr = 1e-2, .beta1 = 0.9, .beta2 = 0.99, .eps = 1e-6, .weight_decay = 1e-3});
    ddp::optim::sgd g(sdp, {.lr = 0.05, .momentum = 0.9, .weight_decay = 1e-3, .nesterov = true});
    for (int step = 0; step < 8; ++step) {
      auto s = shard(global_batch(step, R), r);
      reference->zero_grad();
      torch::nn::functional::cross_entropy(whole->forward(s.x), s.y).backward();
      dp.synchronize();
      reference->step();
      sharded->zero_grad();
      torch::nn::functional::cross_entropy(sharded->forward(s.x), s.y).backward();
      sdp.synchronize();
      if (adam)
        a.step();
      else
        g.step();
    }
    CHECK(max_rel_diff(sharded, whole) < 1e-5);
  }
}

TEST_CASE("join: uneven inputs, joined ranks count as zeros") {
  auto& pg = group();
  const int R = pg.size(), r = pg.rank();
  Net reference = make_net(31), local = make_net(31);
  ddp::distributed_data_parallel dp(*local, pg, {.uneven_inputs = true});
  torch::optim::SGD ref_opt(reference->parameters(), torch::optim::SGDOptions(0.05));
  torch::optim::SGD opt(local->parameters(), torch::optim::SGDOptions(0.05));
  const int longest = 2 + (R - 1);
  for (int step = 0; step < longest; ++step) {
    auto whole = global_batch(step, R);
    // Rank q trains 2 + q steps; the mean still divides by R.
    ref_opt.zero_grad();
    torch::Tensor total = torch::zeros({});
    for (int q = 0; q < R; ++q)
      if (step < 2 + q) {
        auto s = shard(whole, q);
        total = total + torch::nn::functional::cross_entropy(reference->forward(s.x), s.y);
      }
    (total / R).backward();
    ref_opt.step();
    if (step < 2 + r) {
      opt.zero_grad();
      auto s = shard(whole, r);
      torch::nn::functional::cross_entropy(local->forward(s.x), s.y).backward();
      dp.synchronize();
      opt.step();
    }
  }
  dp.join();
  if (r == R - 1) CHECK(max_rel_diff(local, reference) < 1e-5); // the rank that trained every step
}

TEST_CASE("gradients set by hand, marks by hand beside the hooks") {
  auto& pg = group();
  const double expect = (pg.size() + 1) / 2.0; // rank r's gradient is r + 1 everywhere
  torch::manual_seed(2);
  auto lin = torch::nn::Linear(4, 3);
  ddp::distributed_data_parallel dp(*lin, pg);
  auto mean_grad = [&] { return lin->weight.grad().mean().item<double>(); };
  (lin->weight.sum() * (pg.rank() + 1) + lin->bias.sum() * (pg.rank() + 1)).backward();
  dp.synchronize();
  CHECK(mean_grad() == doctest::Approx(expect));
  // (A second synchronize() here, with nothing new, is refused on every rank: tests/dist/test_misuse.cpp.)
  // Gradients written by hand (torch::autograd::grad, say) are reduced as they are.
  {
    torch::NoGradGuard no_grad;
    lin->weight.grad().fill_(pg.rank() + 1);
    lin->bias.grad().fill_(pg.rank() + 1);
  }
  dp.synchronize();
  CHECK(mean_grad() == doctest::Approx(expect));
  // Marks by hand beside the hooks' own.
  lin->zero_grad();
  (lin->weight.sum() * (pg.rank() + 1)).backward(); // bias unused here
  dp.mark_unused(dp.parameter_index("bias"));
  dp.synchronize();
  CHECK(mean_grad() == doctest::Approx(expect));
  CHECK(lin->bias.grad().abs().sum().item<double>() == 0.0);
}

TEST_CASE("a gradient changed in place between backward and synchronize() is refused") {
  auto net = make_net(3);
  ddp::distributed_data_parallel dp(*net, group());
  auto s = shard(global_batch(0, group().size()), group().rank());
  torch::nn::functional::cross_entropy(net->forward(s.x), s.y).backward();
  net->fc1->weight.grad().mul_(2); // its bucket may already be on the wire
  CHECK_THROWS_WITH_AS(dp.synchronize(), doctest::Contains("'fc1.weight': its gradient was changed in place"),
                       ddp::error);
  // After synchronize() it is the user's again.
  net->zero_grad();
  torch::nn::functional::cross_entropy(net->forward(s.x), s.y).backward();
  dp.synchronize();
  torch::nn::utils::clip_grad_norm_(net->parameters(), 0.1);
  net->zero_grad();
  torch::nn::functional::cross_entropy(net->forward(s.x), s.y).backward();
  CHECK_NOTHROW(dp.synchronize());
}

TEST_CASE("tied parameters: one tensor under two names is one parameter") {
  struct TiedImpl : torch::nn::Module {
    TiedImpl() {
      w = register_parameter("embedding", torch::randn({10, 4}));
      register_parameter("projection", w); // as language models tie input and output embeddings
      b = register_parameter("bias", torch::zeros({4}));
    }
    torch::Tensor w, b;
  };
  auto& pg = group();
  torch::manual_seed(4);
  TiedImpl tied;
  ddp::distributed_data_parallel dp(tied, pg);
  CHECK(dp.num_parameters() == 2); // embedding, bias
  ((tied.w.sum() + tied.b.sum()) * (pg.rank() + 1)).backward();
  CHECK_NOTHROW(dp.synchronize());
  CHECK(tied.w.grad().mean().item<double>() == doctest::Approx((pg.size() + 1) / 2.0));
}

TEST_CASE("sharded join with BatchNorm buffers, and optimizer misuse") {
  auto& pg = group();
  const int r = pg.rank();
  torch::manual_seed(8);
  torch::nn::Sequential net(torch::nn::Linear(6, 4), torch::nn::BatchNorm1d(4));
  ddp::sharded_data_parallel sdp(*net, pg, {.uneven_inputs = true});
  ddp::optim::sgd opt(sdp, {.lr = 0.1});
  CHECK_THROWS_WITH_AS(opt.step(), doctest::Contains("before synchronize()"), ddp::error);
  CHECK(opt.steps() == 0); // a refused step is not counted
  for (int step = 0; step < 2 + r; ++step) {
    torch::manual_seed(50 + static_cast<std::uint64_t>(step * 10 + r));
    net->zero_grad();
    net->forward(torch::randn({8, 6})).pow(2).sum().backward();
    sdp.synchronize();
    opt.step();
  }
  sdp.join(opt);
  std::vector<float> mine;
  for (auto& p : net->parameters())
    for (std::int64_t i = 0; i < p.numel(); ++i)
      mine.push_back(p.data_ptr<float>()[i]);
  std::vector<float> all(mine.size() * static_cast<std::size_t>(pg.size()));
  pg.all_gather(mine, all);
  for (std::size_t i = 0; i < all.size(); ++i)
    CHECK(all[i] == all[i % mine.size()]); // every rank holds the same model
  opt.options().momentum = 0.9;
  CHECK_THROWS_WITH_AS(opt.step(), doctest::Contains("momentum was 0 when the optimizer was built"),
                       ddp::error);
}
