// A few elements (first, middle, last) of each host gradient, read as bits
// when it is marked ready (before its bucket reduces it) and when
// synchronize() is done. A synchronize() that begins with every gradient
// still holding what the last one left, where that reduction visibly changed
// them, has no new gradients: it would reduce reduced gradients (twice the sum
// under reduction::sum), so step_driver refuses it. Where the reduction left a
// rank's gradients as they were (its own equalled the mean, as in a synthetic
// test) nothing proves a repeat, and all-zero gradients (a frozen model) prove
// nothing either: neither is refused. Three reads per parameter per step.
#ifndef DDP_DETAIL_DATA_PARALLEL_GRADIENT_FINGERPRINT_HPP
#define DDP_DETAIL_DATA_PARALLEL_GRADIENT_FINGERPRINT_HPP

#include <ddp/detail/data_parallel/model_layout.hpp>

#include <array>
#include <cstdint>
#include <cstring>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

class gradient_fingerprint {
public:
  explicit gradient_fingerprint(std::size_t params) : before_(params), after_(params), where_(params) {}

  /// Gradient i is final for this step and not reduced yet.
  void before_reduction(std::size_t i, const tensor_slot& p) {
    if (!p.on_device && p.count > 0) before_[i] = sample(p);
  }

  /// The step's reduction is done: what the gradients hold now.
  void after_reduction(const std::vector<tensor_slot>& params) {
    valid_ = true;
    for (std::size_t i = 0; i < params.size(); ++i) {
      if (params[i].on_device) {
        valid_ = false; // not read on the host
        return;
      }
      if (params[i].count == 0) continue;
      after_[i] = sample(params[i]);
      where_[i] = params[i].grad;
    }
  }

  /// Whether every gradient is where the last reduction left it and holds the
  /// same bits there, some non-zero, and the reduction had changed some.
  bool repeated(const std::vector<tensor_slot>& params) const {
    if (!valid_) return false;
    bool nonzero = false, reduction_changed = false;
    for (std::size_t i = 0; i < params.size(); ++i) {
      const auto& p = params[i];
      if (p.count == 0) continue;
      if (where_[i] != p.grad || sample(p) != after_[i]) return false;
      reduction_changed = reduction_changed || before_[i] != after_[i];
      for (auto bits : after_[i])
        nonzero = nonzero || bits != 0;
    }
    return nonzero && reduction_changed;
  }

private:
  using samples = std::array<std::uint64_t, 3>;
  static samples sample(const tensor_slot& p) {
    const std::size_t size = size_of(p.type);
    samples out{};
    const std::size_t at[3] = {0, p.count / 2, p.count - 1};
    for (int i = 0; i < 3; ++i)
      std::memcpy(&out[i], static_cast<const char*>(p.grad) + at[i] * size, size);
    return out;
  }

  std::vector<samples> before_, after_;
  std::vector<const void*> where_;
  bool valid_ = false; ///< a reduction of host gradients was sampled
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_DATA_PARALLEL_GRADIENT_FINGERPRINT_HPP
