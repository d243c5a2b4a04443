// torch.optim.Adam / SGD written out on whole parameters: the reference that
// ddp::optim's sharded updates (and a checkpoint resumed at another world size) must
// reproduce.
#pragma once

#include "mlp.hpp"

#include <ddp/optim/adam.hpp>
#include <ddp/optim/sgd.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

namespace ddp_test {

/// torch.optim.Adam / SGD on whole parameters, in the element order and
/// precision ddp::optim uses: the reference the shards must reproduce.
template <class S> struct whole_optimizer {
  bool adam;
  ddp::optim::adam_options a{};
  ddp::optim::sgd_options g{};
  std::vector<std::vector<S>> m{}, v{};
  std::uint64_t t = 0;

  void step(mlp<S>& net) {
    ++t;
    std::size_t k = 0;
    net.for_each_parameter([&](auto&&, auto& value, auto& grad) {
      if (m.size() <= k) {
        m.emplace_back(static_cast<std::size_t>(value.size()), S(0));
        v.emplace_back(static_cast<std::size_t>(value.size()), S(0));
      }
      for (Eigen::Index i = 0; i < value.size(); ++i)
        update(value.data()[i], grad.data()[i], m[k][static_cast<std::size_t>(i)],
               v[k][static_cast<std::size_t>(i)]);
      ++k;
    });
  }

  void update(S& p, S grad, S& m1, S& m2) const {
    if (adam) {
      const S g1 = a.weight_decay != 0 ? grad + static_cast<S>(a.weight_decay) * p : grad;
      m1 = m1 * static_cast<S>(a.beta1) + static_cast<S>(1 - a.beta1) * g1;
      m2 = m2 * static_cast<S>(a.beta2) + static_cast<S>(1 - a.beta2) * g1 * g1;
      const S bc2 = static_cast<S>(std::sqrt(1 - std::pow(a.beta2, static_cast<double>(t))));
      const S denom = std::sqrt(m2) / bc2 + static_cast<S>(a.eps);
      p -= static_cast<S>(a.lr / (1 - std::pow(a.beta1, static_cast<double>(t)))) * (m1 / denom);
    } else {
      S d = g.weight_decay != 0 ? grad + static_cast<S>(g.weight_decay) * p : grad;
      if (g.momentum != 0) {
        m1 = t == 1 ? d : m1 * static_cast<S>(g.momentum) + static_cast<S>(1 - g.dampening) * d;
        d = g.nesterov ? d + static_cast<S>(g.momentum) * m1 : m1;
      }
      p -= static_cast<S>(g.lr) * d;
    }
  }
};

} // namespace ddp_test
