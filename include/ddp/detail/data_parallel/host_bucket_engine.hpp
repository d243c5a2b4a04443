// Launches and completes the buckets of a plan whose gradients are in host
// memory: packs (converting and scaling in the same pass) where the plan says
// packed, scales in place or fuses the scale into the ring otherwise, and
// unpacks when a bucket is done. The CUDA engine sits beside it.
#ifndef DDP_DETAIL_DATA_PARALLEL_HOST_BUCKET_ENGINE_HPP
#define DDP_DETAIL_DATA_PARALLEL_HOST_BUCKET_ENGINE_HPP

#include <ddp/backend/communicator.hpp>
#include <ddp/detail/data_parallel/bucket_plan.hpp>
#include <ddp/detail/data_parallel/unchecked_works.hpp> // wait_quietly
#include <ddp/detail/numeric/elementwise.hpp>

#include <chrono>
#include <cstring>
#include <optional>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

/// Test-only: when set, called before the host engine allocates the packing
/// buffer of bucket `bucket` (a test throws from it, as a failed allocation
/// would); set and read on the training thread only. Null otherwise: one load
/// per packed bucket per layout, which is per step only where gradient storage
/// moves every step (and then a buffer's resize costs more than the load).
inline void (*before_packing_buffer)(std::size_t bucket, std::size_t bytes) = nullptr;

template <communicator Comm> class host_bucket_engine {
public:
  static constexpr plan_capabilities capabilities{.fragments = fragment_communicator<Comm>};
  /// The step's last bucket waits for synchronize(), which may run it on its own thread.
  static constexpr bool defers_last_bucket = true;

  host_bucket_engine(Comm& comm, const bucket_plan& plan, const std::vector<tensor_slot>& params)
      : comm_(comm), plan_(plan), params_(params), state_(plan.buckets.size()) {
    layout();
  }
  host_bucket_engine(const host_bucket_engine&) = delete;
  host_bucket_engine& operator=(const host_bucket_engine&) = delete;
  ~host_bucket_engine() { wait_all_quietly(); }

  /// Packing buffers for the packed buckets (kept across steps); call again
  /// when the plan's paths changed.
  void layout() { lay_out(plan_, state_); }

  /// State and buffers for the buckets of `next`, a plan that will replace
  /// this engine's between steps, made aside: the ones in use stay until
  /// adopt_prepared(), so a failure here leaves the engine as it was.
  void prepare_plan(const bucket_plan& next) {
    std::vector<runtime> state(next.buckets.size());
    lay_out(next, state);
    next_state_ = std::move(state);
  }

  /// The plan prepare_plan() saw will not be used: its buffers go now.
  void discard_prepared() noexcept { std::vector<runtime>().swap(next_state_); }

  /// The plan this engine reads is now the one prepare_plan() saw (nothing in flight).
  void adopt_prepared() noexcept {
    wait_all_quietly();
    state_.swap(next_state_);
    discard_prepared();
  }

  /// A gradient with no contribution this step.
  static void zero(const tensor_slot& p) { std::memset(p.grad, 0, p.count * size_of(p.type)); }

  /// Starts the all-reduce of bucket i; `scale` (1/W for a mean, else 1) is
  /// fused into the packing copy or the ring's last step where there is one.
  /// `caller_waits`: the caller waits for it at once (the step's last bucket,
  /// launched by synchronize()), so the communicator may run it on this thread.
  void launch(std::size_t i, double scale, bool caller_waits = false) {
    auto& b = plan_.buckets[i];
    auto& s = state_[i];
    s.t_launch = std::chrono::steady_clock::now();
    if (b.path == bucket_path::packed) {
      const std::size_t wsize = size_of(b.wire_type);
      for (std::size_t k = 0; k < b.params.size(); ++k) {
        auto& p = params_[b.params[k]];
        copy_scaled(s.buffer.data() + b.offsets[k] * wsize, b.wire_type, p.grad, p.type, p.count, scale);
      }
      s.in_flight = reduce(i, nullptr, 1.0, caller_waits);
      return;
    }
    if constexpr (!fragment_communicator<Comm>)
      if (scale != 1.0) scale_in_place(params_[b.params.front()].grad, b.elements, b.param_type, scale);
    s.in_flight = reduce(i, nullptr, fragment_communicator<Comm> ? scale : 1.0, caller_waits);
  }

  /// Waits for bucket i (if launched) and unpacks it into the gradients.
  void finish(std::size_t i) {
    if (wait(i)) unpack(i);
  }

  /// Waits for bucket i's collective; false when it was not launched.
  bool wait(std::size_t i) {
    auto& s = state_[i];
    if (!s.in_flight) return false;
    auto w = std::move(*s.in_flight);
    s.in_flight.reset();
    w.wait();
    s.t_done = std::chrono::steady_clock::now();
    return true;
  }

  /// Copies a packed bucket's reduced data back into its gradients (after wait).
  void unpack(std::size_t i) {
    auto& s = state_[i];
    auto& b = plan_.buckets[i];
    if (b.path != bucket_path::packed) return;
    const std::size_t wsize = size_of(b.wire_type);
    for (std::size_t k = 0; k < b.params.size(); ++k) {
      auto& p = params_[b.params[k]];
      copy_scaled(p.grad, p.type, s.buffer.data() + b.offsets[k] * wsize, b.wire_type, p.count, 1.0);
    }
  }

  /// Before the first stand-in: host zeros are allocated as they are needed.
  void prepare_join() {}
  /// Nothing to order after the last unpack: the host is done with it.
  void finish_step(bool /*blocking*/) {}

  /// A joined rank's stand-in for bucket i: the same collective the others
  /// run, message for message, on zeros.
  work reduce_zeros(std::size_t i, double scale) {
    auto& b = plan_.buckets[i];
    auto& s = state_[i];
    const std::size_t bytes = b.elements * size_of(b.wire_type);
    if constexpr (shm_communicator<Comm>) {
      // Gradients in a shared arena are reduced in place, and the other ranks
      // reduce exactly there (the collective's header says so): zeros go there
      // too. This rank's gradients then end as the others' reduced sum (times
      // the scale), where a private arena's would stay its own: it steps no more.
      void* grads = params_[b.params.front()].grad;
      if (b.path == bucket_path::in_place && comm_.is_shm_array_memory(grads, bytes)) {
        std::memset(grads, 0, bytes);
        return reduce(i, nullptr, scale);
      }
    }
    s.shadow.assign(bytes, std::byte{0});
    return reduce(i, s.shadow.data(), scale);
  }

  void wait_all_quietly() {
    for (auto& s : state_)
      wait_quietly(s.in_flight);
  }

  /// Milliseconds from launch to done of bucket i in the last step.
  double last_duration_ms(std::size_t i) const {
    return std::chrono::duration<double, std::milli>(state_[i].t_done - state_[i].t_launch).count();
  }

private:
  struct runtime {
    std::vector<std::byte> buffer; ///< packed wire data (allocated once, reused)
    std::vector<std::byte> shadow; ///< zeros for join()
    std::optional<work> in_flight;
    std::chrono::steady_clock::time_point t_launch, t_done;
  };

  static void lay_out(const bucket_plan& plan, std::vector<runtime>& state) {
    for (std::size_t i = 0; i < state.size(); ++i) {
      auto& b = plan.buckets[i];
      if (b.path == bucket_path::packed) {
        const std::size_t bytes = b.elements * size_of(b.wire_type);
        if (before_packing_buffer) before_packing_buffer(i, bytes);
        state[i].buffer.resize(bytes);
      } else {
        state[i].buffer = {};
      }
    }
  }

  /// Starts the all-reduce of bucket i on its gradients, its buffer, or
  /// `zeros` in their place (cut into the same fragments).
  work reduce(std::size_t i, std::byte* zeros, double scale, bool caller_waits = false) {
    auto& b = plan_.buckets[i];
    if constexpr (fragment_communicator<Comm>) {
      if (b.path != bucket_path::packed) {
        std::vector<fragment> frags;
        const std::size_t wsize = size_of(b.wire_type);
        if (b.path == bucket_path::in_place) {
          frags.push_back({zeros ? zeros : params_[b.params.front()].grad, b.elements});
        } else {
          for (std::size_t k = 0; k < b.params.size(); ++k) {
            auto& p = params_[b.params[k]];
            frags.push_back({zeros ? zeros + b.offsets[k] * wsize : p.grad, p.count});
          }
        }
        return comm_.all_reduce_fragments(std::move(frags), b.wire_type, scale, caller_waits);
      }
    }
    void* data = zeros                           ? static_cast<void*>(zeros)
                 : b.path == bucket_path::packed ? static_cast<void*>(state_[i].buffer.data())
                                                 : params_[b.params.front()].grad;
    return comm_.all_reduce(data, b.elements, b.wire_type, op::sum, caller_waits);
  }

  Comm& comm_;
  const bucket_plan& plan_;
  const std::vector<tensor_slot>& params_;
  std::vector<runtime> state_;
  std::vector<runtime> next_state_; ///< prepare_plan()'s, until adopt_prepared()
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_DATA_PARALLEL_HOST_BUCKET_ENGINE_HPP
