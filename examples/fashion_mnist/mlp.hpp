// The example's model: an MLP 784-256-128-10 (ReLU, softmax cross-entropy)
// in Eigen. Gradients live in a ddp::arena, so DDP reduces them in place (with
// ddp::gloo in the node's shared memory: no copies through the segment).
#pragma once

#include <ddp/arena.hpp>
#include <ddp/error.hpp>

#include <Eigen/Core>

#include <array>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace example {

using matrix = Eigen::MatrixXf;
using grad_map = Eigen::Map<matrix>;

struct mlp {
  static constexpr int layers = 3;
  static constexpr int classes = 10; ///< outputs; the data reader refuses labels outside 0..classes-1
  static constexpr std::array<int, layers + 1> shape{784, 256, 128, classes};
  std::vector<int> dims{shape.begin(), shape.end()};
  matrix w[layers], b[layers]; // w[l]: dims[l+1] x dims[l], b[l]: dims[l+1] x 1
  ddp::arena<float> grads;     // dw0, db0, dw1, db1, dw2, db2
  std::vector<grad_map> dw, db;
  matrix act[layers + 1]; // activations of the last forward

  explicit mlp(unsigned seed) : mlp(seed, ddp::arena<float>(sizes())) {}
  /// Gradients in `g` (laid out by sizes()): e.g. ddp::arena<float>(mlp::sizes(), pg),
  /// in the memory a node's ranks share, where DDP reduces them without copies.
  mlp(unsigned seed, ddp::arena<float> g) : grads(std::move(g)) {
    std::mt19937 gen(seed);
    for (int l = 0; l < layers; ++l) {
      // He initialisation for ReLU layers: N(0, 2 / fan_in).
      std::normal_distribution<float> n(0.0f, std::sqrt(2.0f / static_cast<float>(dims[l])));
      w[l] = matrix(dims[l + 1], dims[l]);
      for (Eigen::Index i = 0; i < w[l].size(); ++i)
        w[l].data()[i] = n(gen);
      b[l] = matrix::Zero(dims[l + 1], 1);
      dw.emplace_back(grads.slot(2 * l).data(), dims[l + 1], dims[l]);
      db.emplace_back(grads.slot(2 * l + 1).data(), dims[l + 1], 1);
    }
  }

  static std::vector<std::size_t> sizes() {
    std::vector<std::size_t> s;
    for (std::size_t l = 0; l < layers; ++l) {
      s.push_back(static_cast<std::size_t>(shape[l + 1] * shape[l]));
      s.push_back(static_cast<std::size_t>(shape[l + 1]));
    }
    return s;
  }

  template <class F> void for_each_parameter(F&& f) {
    for (int l = 0; l < layers; ++l) {
      f("fc" + std::to_string(l + 1) + ".weight", w[l], dw[l]);
      f("fc" + std::to_string(l + 1) + ".bias", b[l], db[l]);
    }
  }

  /// Logits (10 x batch) for inputs x (784 x batch).
  const matrix& forward(const matrix& x) {
    act[0] = x;
    for (int l = 0; l < layers; ++l) {
      act[l + 1].noalias() = w[l] * act[l];
      act[l + 1].colwise() += b[l].col(0);
      if (l + 1 < layers) act[l + 1] = act[l + 1].cwiseMax(0.0f);
    }
    return act[layers];
  }

  /// Mean softmax cross-entropy of the last forward against `labels`; writes the
  /// gradients (replacing them) and calls `layer_done(l)` as each layer's are final.
  /// A label indexes a row of the logits: one outside them is refused, never followed
  /// (the reader already refuses such files; this keeps any other caller in bounds).
  float backward(const std::vector<int>& labels, const std::function<void(int)>& layer_done) {
    matrix delta = act[layers];
    if (static_cast<Eigen::Index>(labels.size()) != delta.cols())
      throw ddp::error(ddp::error_kind::data, "mlp::backward: " + std::to_string(labels.size()) +
                                                  " labels for a batch of " + std::to_string(delta.cols()));
    const auto batch = static_cast<float>(labels.size());
    float loss = 0;
    for (Eigen::Index c = 0; c < delta.cols(); ++c) {
      const int label = labels[static_cast<std::size_t>(c)];
      if (label < 0 || label >= delta.rows())
        throw ddp::error(ddp::error_kind::data, "mlp::backward: label " + std::to_string(label) +
                                                    " of batch column " + std::to_string(c) +
                                                    " is not one of the " + std::to_string(delta.rows()) +
                                                    " classes; check the labels file");
      auto col = delta.col(c);
      const float m = col.maxCoeff();
      col = (col.array() - m).exp();
      const float z = col.sum();
      col /= z;
      loss -= std::log(std::max(col(label), 1e-30f));
      col(label) -= 1.0f;
    }
    delta /= batch;
    for (int l = layers - 1; l >= 0; --l) {
      dw[l].noalias() = delta * act[l].transpose();
      db[l] = delta.rowwise().sum();
      if (layer_done) layer_done(l);
      if (l > 0)
        delta = (w[l].transpose() * delta).cwiseProduct((act[l].array() > 0.0f).cast<float>().matrix());
    }
    return loss / batch;
  }
};

/// SGD with momentum, PyTorch's formulation: v = mu * v + g; w -= lr * v.
struct sgd_momentum {
  float lr, mu;
  std::vector<matrix> velocity;

  void step(mlp& m) {
    if (velocity.empty())
      for (int l = 0; l < mlp::layers; ++l) {
        velocity.push_back(matrix::Zero(m.w[l].rows(), m.w[l].cols()));
        velocity.push_back(matrix::Zero(m.b[l].rows(), 1));
      }
    for (int l = 0; l < mlp::layers; ++l) {
      velocity[2 * l] = mu * velocity[2 * l] + m.dw[l];
      velocity[2 * l + 1] = mu * velocity[2 * l + 1] + m.db[l];
      m.w[l] -= lr * velocity[2 * l];
      m.b[l] -= lr * velocity[2 * l + 1];
    }
  }
};

} // namespace example
