// A small Eigen MLP (tanh hidden layers, mean-squared-error loss) with exact
// gradients, used by the DDP equivalence tests and benchmarks. Gradients live
// either in separate allocations or in a ddp::arena (then buckets reduce in place).
#pragma once

#include <ddp/arena.hpp>

#include <Eigen/Core>

#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace ddp_test {

template <class S> struct mlp {
  using mat = Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic>;
  using map = Eigen::Map<mat>;

  std::vector<int> dims; // e.g. {6, 16, 12, 3}
  std::vector<mat> w, b; // w[l]: dims[l+1] x dims[l], b[l]: dims[l+1] x 1
  std::vector<std::vector<S>> own_grads;
  std::unique_ptr<ddp::arena<S>> grads_arena;
  std::vector<map> dw, db;
  std::vector<mat> acts; // forward activations, for backward

  /// `make_arena(sizes)`, when given, makes the arena (e.g. in shared memory:
  /// ddp::arena(sizes, pg)); else a private one.
  template <class MakeArena = std::nullptr_t>
  mlp(std::vector<int> d, unsigned seed, bool use_arena, MakeArena make_arena = nullptr)
      : dims(std::move(d)) {
    std::mt19937 g(seed);
    std::normal_distribution<double> n(0.0, 1.0);
    const std::size_t layers = dims.size() - 1;
    std::vector<std::size_t> sizes; // registration order: w0, b0, w1, b1, ...
    for (std::size_t l = 0; l < layers; ++l) {
      mat wl(dims[l + 1], dims[l]), bl(dims[l + 1], 1);
      for (Eigen::Index i = 0; i < wl.size(); ++i)
        wl.data()[i] = static_cast<S>(n(g) / std::sqrt(dims[l]));
      for (Eigen::Index i = 0; i < bl.size(); ++i)
        bl.data()[i] = static_cast<S>(0.1 * n(g));
      w.push_back(wl);
      b.push_back(bl);
      sizes.push_back(static_cast<std::size_t>(wl.size()));
      sizes.push_back(static_cast<std::size_t>(bl.size()));
    }
    if constexpr (std::is_same_v<MakeArena, std::nullptr_t>) {
      if (use_arena) grads_arena = std::make_unique<ddp::arena<S>>(sizes);
    } else {
      if (use_arena) grads_arena = make_arena(sizes);
    }
    for (std::size_t k = 0; k < sizes.size(); ++k) {
      S* p;
      if (use_arena) {
        p = grads_arena->slot(k).data();
      } else {
        own_grads.emplace_back(sizes[k] + 16, S(0)); // separate allocations: never contiguous
        p = own_grads.back().data();
      }
      auto rows = dims[k / 2 + 1], cols = k % 2 ? 1 : dims[k / 2];
      (k % 2 ? db : dw).emplace_back(p, rows, cols);
    }
  }

  template <class F> void for_each_parameter(F&& f) {
    for (std::size_t l = 0; l < w.size(); ++l) {
      f("fc" + std::to_string(l + 1) + ".weight", w[l], dw[l]);
      f("fc" + std::to_string(l + 1) + ".bias", b[l], db[l]);
    }
  }

  void zero_grad() {
    for (auto& m : dw)
      m.setZero();
    for (auto& m : db)
      m.setZero();
  }

  /// Forward and backward on columns of x (inputs) and y (targets); adds
  /// d(mean loss)/d(theta) to the gradients. `layer_done(l)` runs when layer l's
  /// gradients are final (last layer first), for overlapping communication.
  S train_step(const mat& x, const mat& y, const std::function<void(std::size_t)>& layer_done = {}) {
    const std::size_t layers = w.size();
    acts.assign(1, x);
    for (std::size_t l = 0; l < layers; ++l) {
      mat z = (w[l] * acts.back()).colwise() + b[l].col(0);
      acts.push_back(l + 1 < layers ? mat(z.array().tanh()) : z);
    }
    const S inv_b = S(1) / static_cast<S>(x.cols());
    mat delta = (acts.back() - y) * inv_b;
    S loss = S(0.5) * (acts.back() - y).squaredNorm() * inv_b;
    for (std::size_t l = layers; l-- > 0;) {
      dw[l] += delta * acts[l].transpose();
      db[l] += delta.rowwise().sum();
      if (l > 0) delta = ((w[l].transpose() * delta).array() * (S(1) - acts[l].array().square())).matrix();
      if (layer_done) layer_done(l);
    }
    return loss;
  }

  void sgd(S lr) {
    for (std::size_t l = 0; l < w.size(); ++l) {
      w[l] -= lr * mat(dw[l]);
      b[l] -= lr * mat(db[l]);
    }
  }

  /// All parameters flattened, for comparisons.
  std::vector<double> flat() const {
    std::vector<double> out;
    for (std::size_t l = 0; l < w.size(); ++l) {
      for (Eigen::Index i = 0; i < w[l].size(); ++i)
        out.push_back(static_cast<double>(w[l].data()[i]));
      for (Eigen::Index i = 0; i < b[l].size(); ++i)
        out.push_back(static_cast<double>(b[l].data()[i]));
    }
    return out;
  }
};

/// A deterministic batch: inputs in columns, targets from a fixed nonlinear map.
template <class S>
std::pair<typename mlp<S>::mat, typename mlp<S>::mat> make_batch(int in, int out, int count, unsigned seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  typename mlp<S>::mat x(in, count), y(out, count);
  for (Eigen::Index i = 0; i < x.size(); ++i)
    x.data()[i] = static_cast<S>(u(g));
  for (int c = 0; c < count; ++c)
    for (int o = 0; o < out; ++o)
      y(o, c) = static_cast<S>(std::sin(static_cast<double>(x((o * 3) % in, c)) * (o + 1)));
  return {x, y};
}

inline double relative_difference(const std::vector<double>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return std::sqrt(num / (den > 0 ? den : 1));
}

} // namespace ddp_test
