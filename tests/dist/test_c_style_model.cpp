// C-style models at world sizes 1..4. ddp::flat_model (one parameter block and
// one gradient block, as C trainers keep them): its buckets reduce in place,
// whatever order the tensors are listed in, and R ranks equal one process on
// the whole batch. Walks and collectives take temporary views.
#include "group.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <span>
#include <vector>

using ddp_test::group;

namespace {

constexpr std::size_t in = 6, hid = 16, out = 3, per_rank_batch = 4;

/// Where each tensor lies in the blocks, in memory order (llm.c's order: the
/// forward order of the layers).
const std::vector<ddp::flat_tensor> layout{
    {"fc1.weight", 0, hid* in},
    {"fc1.bias", hid* in, hid},
    {"fc2.weight", hid* in + hid, out* hid},
    {"fc2.bias", hid* in + hid + out* hid, out},
};
constexpr std::size_t total = hid * in + hid + out * hid + out;

/// A two-layer linear network over the blocks: forward, and backward into the
/// gradient block (mean squared error, mean over `count` samples).
struct c_net {
  std::vector<float> params = std::vector<float>(total), grads = std::vector<float>(total);

  explicit c_net(unsigned seed) {
    std::mt19937 gen(seed);
    std::normal_distribution<float> n(0.f, 0.4f);
    for (auto& p : params)
      p = n(gen);
  }
  float* w1() { return params.data(); }
  float* b1() { return w1() + hid * in; }
  float* w2() { return b1() + hid; }
  float* b2() { return w2() + out * hid; }

  void backward(const float* x, const float* y, std::size_t count) {
    std::fill(grads.begin(), grads.end(), 0.f);
    float* dw1 = grads.data();
    float* db1 = dw1 + hid * in;
    float* dw2 = db1 + hid;
    float* db2 = dw2 + out * hid;
    for (std::size_t s = 0; s < count; ++s) {
      const float* xs = x + s * in;
      float h[hid], gp[out], gh[hid] = {};
      for (std::size_t j = 0; j < hid; ++j) {
        h[j] = b1()[j];
        for (std::size_t i = 0; i < in; ++i)
          h[j] += w1()[j * in + i] * xs[i];
      }
      for (std::size_t o = 0; o < out; ++o) {
        float p = b2()[o];
        for (std::size_t j = 0; j < hid; ++j)
          p += w2()[o * hid + j] * h[j];
        gp[o] = 2.f * (p - y[s * out + o]) / static_cast<float>(count);
      }
      for (std::size_t o = 0; o < out; ++o) {
        db2[o] += gp[o];
        for (std::size_t j = 0; j < hid; ++j) {
          dw2[o * hid + j] += gp[o] * h[j];
          gh[j] += w2()[o * hid + j] * gp[o];
        }
      }
      for (std::size_t j = 0; j < hid; ++j) {
        db1[j] += gh[j];
        for (std::size_t i = 0; i < in; ++i)
          dw1[j * in + i] += gh[j] * xs[i];
      }
    }
  }
  void sgd(float lr) {
    for (std::size_t k = 0; k < total; ++k)
      params[k] -= lr * grads[k];
  }
};

/// The same blocks walked by hand in memory order, with temporary spans: the
/// order in-place buckets do not want (see docs/api.md, Flat models).
struct forward_walk {
  c_net* net;
  template <class F> void for_each_parameter(F&& f) {
    for (const auto& t : layout)
      f(t.name, std::span<float>(net->params.data() + t.offset, t.count),
        std::span<float>(net->grads.data() + t.offset, t.count));
  }
};

std::vector<float> randoms(std::size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(n);
  for (auto& x : v)
    x = u(gen);
  return v;
}

double relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (std::size_t k = 0; k < a.size(); ++k) {
    num += (double(a[k]) - b[k]) * (double(a[k]) - b[k]);
    den += double(b[k]) * b[k];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

/// Trains R ranks, each on its shard of every global batch, through `Model`
/// over `net`, and one net in this process on the whole batches; returns the
/// relative parameter difference. `after_first` sees the DDP after step 0.
template <class Bucketing, class Model, class Check>
double train_and_compare(c_net& net, Model& model, Check&& after_first) {
  auto& pg = group();
  const auto R = static_cast<std::size_t>(pg.size()), r = static_cast<std::size_t>(pg.rank());
  c_net reference(7);
  ddp::distributed_data_parallel<Model, ddp::gloo, Bucketing> dp(model, pg);
  CHECK(net.params == reference.params); // rank 0's parameters, broadcast
  for (unsigned step = 0; step < 5; ++step) {
    const std::size_t global = R * per_rank_batch;
    const auto x = randoms(global * in, 100 + step), y = randoms(global * out, 200 + step);
    net.backward(x.data() + r * per_rank_batch * in, y.data() + r * per_rank_batch * out, per_rank_batch);
    dp.synchronize();
    reference.backward(x.data(), y.data(), global);
    CHECK(relative_difference(net.grads, reference.grads) < 1e-5); // the mean over ranks, in place
    net.sgd(0.05f);
    reference.sgd(0.05f);
    if (step == 0) after_first(dp);
  }
  return relative_difference(net.params, reference.params);
}

using small_buckets = ddp::bucketing::size_capped<256, 128>;

template <class Bucketing> void flat_in_place(std::vector<ddp::flat_tensor> listed) {
  c_net net(group().rank() == 0 ? 7u : 7u + 1000u * static_cast<unsigned>(group().rank()));
  ddp::flat_model model(net.params.data(), net.grads.data(), listed);
  const double diff = train_and_compare<Bucketing>(net, model, [&](auto& dp) {
    for (const auto& b : dp.buckets())
      CHECK(b.path == ddp::bucket_path::in_place);
  });
  CHECK(diff < 1e-5);
}

} // namespace

TEST_CASE("flat_model: in-place buckets equal one process on the whole batch, whatever the listing order") {
  auto listed = layout;
  std::mt19937 gen(5);
  for (int order = 0; order < 4; ++order) {
    CAPTURE(order);
    if (order == 1) std::reverse(listed.begin(), listed.end());
    if (order >= 2) std::shuffle(listed.begin(), listed.end(), gen);
    flat_in_place<small_buckets>(listed);
    flat_in_place<ddp::bucketing::size_capped<>>(listed);
    flat_in_place<ddp::bucketing::per_tensor>(listed);
    flat_in_place<ddp::bucketing::single_buffer>(listed);
  }
}

TEST_CASE("flat_model: several buckets with small caps, each one contiguous range of the block") {
  c_net net(7);
  ddp::flat_model model(net.params.data(), net.grads.data(), layout);
  ddp::distributed_data_parallel<ddp::flat_model<float>, ddp::gloo, small_buckets> dp(model, group());
  const auto buckets = dp.buckets();
  REQUIRE(buckets.size() >= 3);
  for (const auto& b : buckets)
    CHECK(b.path == ddp::bucket_path::in_place);
  CHECK(dp.parameter_name(0) == "fc2.bias");  // the walk starts at the highest offset
  dp.mark_grad_ready(model.grad("fc2.bias")); // a tensor by name, as a span into the block
  dp.synchronize();
}

TEST_CASE("a hand walk of the block in memory order, with temporary spans: correct, but packed") {
  c_net net(group().rank() == 0 ? 7u : 8u);
  forward_walk model{&net};
  bool some_not_in_place = false;
  const double diff = train_and_compare<small_buckets>(net, model, [&](auto& dp) {
    for (const auto& b : dp.buckets())
      some_not_in_place |= b.parameters.size() > 1 && b.path != ddp::bucket_path::in_place;
  });
  CHECK(diff < 1e-5);
  CHECK(some_not_in_place); // why flat_model walks from the highest offset down
}

TEST_CASE("collectives take temporary views at every world size, blocking and async") {
  auto& pg = group();
  const auto R = static_cast<std::size_t>(pg.size());
  const float r = static_cast<float>(pg.rank());
  std::vector<float> x{r, 1.f, 2.f * r};
  pg.all_reduce(std::span<float>(x.data() + 1, 2), ddp::op::sum);
  pg.all_reduce_async(std::span<float>(x.data(), 1), ddp::op::max).wait();
  const float ranks_sum = static_cast<float>(R * (R - 1) / 2);
  CHECK(x == std::vector<float>{static_cast<float>(R - 1), static_cast<float>(R), 2.f * ranks_sum});

  std::vector<float> y{r + 10.f, r + 20.f};
  pg.broadcast(std::span<float>(y), static_cast<int>(R - 1));
  CHECK(y[0] == static_cast<float>(R - 1) + 10.f);
  y[1] = r + 30.f;
  pg.broadcast_async(std::span<float>(y.data() + 1, 1), 0).wait();
  CHECK(y == std::vector<float>{static_cast<float>(R - 1) + 10.f, 30.f});

  std::vector<float> gathered(2 * R), mine{r, -r};
  pg.all_gather_async(std::span<const float>(mine), std::span<float>(gathered)).wait();
  for (std::size_t k = 0; k < R; ++k)
    CHECK(gathered[2 * k + 1] == -static_cast<float>(k));
  std::vector<float> block(2);
  pg.reduce_scatter(std::vector<float>(2 * R, 1.f), std::span<float>(block), ddp::op::sum);
  CHECK(block == std::vector<float>(2, static_cast<float>(R)));
  pg.reduce_scatter_async(std::span<const float>(gathered), std::span<float>(block), ddp::op::sum).wait();
  // Every rank gathered the same {k, -k} per rank k: block r summed over R ranks.
  CHECK(block == std::vector<float>{static_cast<float>(R) * r, -static_cast<float>(R) * r});
}
