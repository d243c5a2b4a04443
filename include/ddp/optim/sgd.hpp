// ddp::optim::sgd — torch.optim.SGD's update (momentum with dampening,
// Nesterov, L2 weight decay) on this rank's shard of a sharded_data_parallel
// model; step() then all-gathers the parameters.
#ifndef DDP_OPTIM_SGD_HPP
#define DDP_OPTIM_SGD_HPP

#include <ddp/detail/common/message.hpp>
#include <ddp/optim/shard_state.hpp>

#include <cstdint>
#include <string>

DDP_BEGIN_NAMESPACE
namespace optim {

struct sgd_options {
  double lr = 0.01;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
};

template <class Sharded> class sgd {
public:
  sgd(Sharded& model, sgd_options o = {})
      : model_(model), o_(o), state_(model, o.momentum != 0 ? 1 : 0), has_momentum_(o.momentum != 0) {
    if (o.nesterov && (o.momentum <= 0 || o.dampening != 0))
      detail::throw_error(error_kind::config,
                          {"optim::sgd: Nesterov momentum needs a momentum and zero dampening"});
  }

  void step() {
    if (o_.momentum != 0 && !has_momentum_)
      detail::throw_error(error_kind::config,
                          {"optim::sgd: momentum was 0 when the optimizer was built, so it keeps "
                           "no momentum buffers: build it with the momentum you will use"});
    if (o_.nesterov && (o_.momentum <= 0 || o_.dampening != 0))
      detail::throw_error(error_kind::config,
                          {"optim::sgd: Nesterov momentum needs a momentum and zero dampening"});
    const std::uint64_t t = step_ + 1; // counted once the update is done
    model_.update_shards([&](auto& r) {
      using T = typename std::remove_cvref_t<decltype(r.value)>::value_type;
      const T lr = static_cast<T>(o_.lr), mu = static_cast<T>(o_.momentum),
              wd = static_cast<T>(o_.weight_decay), keep = static_cast<T>(1 - o_.dampening);
      T* buf =
          has_momentum_ && o_.momentum != 0 ? state_.template at<T>(0, r.bucket, r.state_offset) : nullptr;
      for (std::size_t i = 0; i < r.value.size(); ++i) {
        T d = o_.weight_decay != 0 ? r.grad[i] + wd * r.value[i] : r.grad[i];
        if (buf) {
          buf[i] = t == 1 ? d : buf[i] * mu + keep * d; // the first step clones, as PyTorch's does
          d = o_.nesterov ? d + mu * buf[i] : buf[i];
        }
        r.value[i] -= lr * d;
      }
    });
    step_ = t;
  }

  sgd_options& options() noexcept { return o_; }
  std::uint64_t steps() const noexcept { return step_; }
  /// What ddp::save_checkpoint records and load_checkpoint restores, re-sharded for any world size.
  static constexpr const char* name() noexcept { return "sgd"; }
  shard_state& state() noexcept { return state_; }
  const shard_state& state() const noexcept { return state_; }
  Sharded& model() noexcept { return model_; }
  void set_steps(std::uint64_t steps) noexcept { step_ = steps; }
  /// This rank's optimizer memory: one value per owned element with momentum, else none.
  std::size_t state_bytes() const noexcept { return state_.bytes(); }

  void save(const std::string& path) const { state_.save(path, step_, "sgd"); }
  /// Collective: every rank loads its own file, and all must be of one save.
  void load(const std::string& path) {
    const auto step = state_.load(path, "sgd");
    shard_state::require_same_step(model_.group(), step, path);
    step_ = step;
  }

private:
  Sharded& model_;
  sgd_options o_;
  shard_state state_;
  bool has_momentum_; ///< momentum buffers exist (momentum was set at construction)
  std::uint64_t step_ = 0;
};

template <class S> sgd(S&, sgd_options) -> sgd<S>;
template <class S> sgd(S&) -> sgd<S>;

} // namespace optim
DDP_END_NAMESPACE

#endif // DDP_OPTIM_SGD_HPP
