// ddp::optim::adam — torch.optim.Adam's update (bias correction, eps added
// after the square root, L2 weight decay) on this rank's shard of a
// sharded_data_parallel model; step() then all-gathers the parameters.
#ifndef DDP_OPTIM_ADAM_HPP
#define DDP_OPTIM_ADAM_HPP

#include <ddp/optim/shard_state.hpp>

#include <cmath>
#include <cstdint>
#include <string>

DDP_BEGIN_NAMESPACE
namespace optim {

struct adam_options {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
};

template <class Sharded> class adam {
public:
  adam(Sharded& model, adam_options o = {}) : model_(model), o_(o), state_(model, 2) {}

  /// One update of this rank's shard with its averaged gradient (after
  /// synchronize()), then every rank's parameters are whole again.
  void step() {
    const std::uint64_t t = step_ + 1; // counted once the update is done
    const double bias1 = 1 - std::pow(o_.beta1, static_cast<double>(t));
    const double bias2_sqrt = std::sqrt(1 - std::pow(o_.beta2, static_cast<double>(t)));
    model_.update_shards([&](auto& r) {
      using T = typename std::remove_cvref_t<decltype(r.value)>::value_type;
      T* m = state_.template at<T>(0, r.bucket, r.state_offset);
      T* v = state_.template at<T>(1, r.bucket, r.state_offset);
      const T b1 = static_cast<T>(o_.beta1), b2 = static_cast<T>(o_.beta2), eps = static_cast<T>(o_.eps);
      const T wd = static_cast<T>(o_.weight_decay), one_b1 = static_cast<T>(1 - o_.beta1),
              one_b2 = static_cast<T>(1 - o_.beta2), bc2 = static_cast<T>(bias2_sqrt),
              step_size = static_cast<T>(o_.lr / bias1);
      for (std::size_t i = 0; i < r.value.size(); ++i) {
        const T g = o_.weight_decay != 0 ? r.grad[i] + wd * r.value[i] : r.grad[i];
        m[i] = m[i] * b1 + one_b1 * g;
        v[i] = v[i] * b2 + one_b2 * g * g;
        const T denom = std::sqrt(v[i]) / bc2 + eps;
        r.value[i] -= step_size * (m[i] / denom);
      }
    });
    step_ = t;
  }

  adam_options& options() noexcept { return o_; }
  std::uint64_t steps() const noexcept { return step_; }
  /// What ddp::save_checkpoint records and load_checkpoint restores, re-sharded for any world size.
  static constexpr const char* name() noexcept { return "adam"; }
  shard_state& state() noexcept { return state_; }
  const shard_state& state() const noexcept { return state_; }
  Sharded& model() noexcept { return model_; }
  void set_steps(std::uint64_t steps) noexcept { step_ = steps; }
  /// This rank's optimizer memory: two values per owned element.
  std::size_t state_bytes() const noexcept { return state_.bytes(); }

  /// Each rank writes its own shard of the state to `<path>.rank<r>`.
  void save(const std::string& path) const { state_.save(path, step_, "adam"); }
  /// Collective: every rank loads its own file, and all must be of one save.
  void load(const std::string& path) {
    const auto step = state_.load(path, "adam");
    shard_state::require_same_step(model_.group(), step, path);
    step_ = step;
  }

private:
  Sharded& model_;
  adam_options o_;
  shard_state state_;
  std::uint64_t step_ = 0;
};

template <class S> adam(S&, adam_options) -> adam<S>;
template <class S> adam(S&) -> adam<S>;

} // namespace optim
DDP_END_NAMESPACE

#endif // DDP_OPTIM_ADAM_HPP
