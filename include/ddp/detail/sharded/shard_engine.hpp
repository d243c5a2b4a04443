// The collectives of sharded_data_parallel on host memory: per bucket, a
// reduce-scatter of the packed gradients (converted and scaled in the packing
// pass) into this rank's averaged gradient shard, and after the optimizer
// step an all-gather of every rank's updated shard back into the parameters.
// Both run over the shard group (the world, unless hybrid). Under hybrid
// sharding each reduce-scattered shard is then all-reduced over the replicate
// group (the ranks that hold the same shard in the other shard groups), in the
// wire type, before its conversion: the packing pass scaled by 1/world, so the
// two sums make the world's mean.
#ifndef DDP_DETAIL_SHARDED_SHARD_ENGINE_HPP
#define DDP_DETAIL_SHARDED_SHARD_ENGINE_HPP

#include <ddp/backend/communicator.hpp>
#include <ddp/detail/backend/call_site.hpp>
#include <ddp/detail/data_parallel/unchecked_works.hpp> // wait_quietly
#include <ddp/detail/numeric/elementwise.hpp>
#include <ddp/detail/sharded/shard_layout.hpp>

#include <algorithm>
#include <cstring>
#include <optional>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

template <communicator Comm> class shard_engine {
public:
  /// `replicate`: null for flat sharding.
  shard_engine(Comm& comm, Comm* replicate, const bucket_plan& plan, const std::vector<tensor_slot>& params)
      : comm_(comm), replicate_(replicate && replicate->size() > 1 ? replicate : nullptr), plan_(plan),
        params_(params) {
    std::vector<std::size_t> counts;
    for (auto& p : params)
      counts.push_back(p.count);
    for (auto& b : plan.buckets) {
      bucket_state s;
      s.shards = shard_bucket(b, counts, comm.size(), comm.rank());
      const std::size_t padded = s.shards.block * static_cast<std::size_t>(comm.size());
      // The reduce-scatter's input and the all-gather's output are never live at
      // once (synchronize() ends one before step() starts the other): one buffer.
      s.staging.assign(padded * std::max(size_of(b.wire_type), size_of(b.param_type)), std::byte{0});
      s.recv.assign(s.shards.block * size_of(b.wire_type), std::byte{0});
      if (b.wire_type != b.param_type) s.grad.assign(s.shards.size * size_of(b.param_type), std::byte{0});
      s.gather_in.assign(s.shards.block * size_of(b.param_type), std::byte{0});
      state_.push_back(std::move(s));
    }
  }
  shard_engine(const shard_engine&) = delete;
  shard_engine& operator=(const shard_engine&) = delete;
  ~shard_engine() { wait_all_quietly(); }

  const bucket_shards& shards(std::size_t b) const { return state_[b].shards; }
  /// This rank's averaged gradient of bucket b (param type, shards(b).size
  /// elements): the reduce-scatter's output itself where no conversion is needed.
  std::byte* grad_shard(std::size_t b) {
    auto& s = state_[b];
    return plan_.buckets[b].wire_type == plan_.buckets[b].param_type ? s.recv.data() : s.grad.data();
  }

  /// Bytes this engine holds for its collectives (staging, not optimizer state).
  std::size_t buffer_bytes() const {
    std::size_t n = 0;
    for (auto& s : state_)
      n += s.staging.size() + s.recv.size() + s.grad.size() + s.gather_in.size() + s.shadow.size();
    return n;
  }

  static void zero(const tensor_slot& p) { std::memset(p.grad, 0, p.count * size_of(p.type)); }

  /// Packs bucket b's gradients (times `scale`, in the wire type) and starts
  /// its reduce-scatter.
  void launch(std::size_t b, double scale) {
    auto& bk = plan_.buckets[b];
    auto& s = state_[b];
    const std::size_t ws = size_of(bk.wire_type), ps = size_of(bk.param_type);
    // Packing writes only the runs: a block's padding holds whatever staging
    // held, and its sum lands past the owner's shard, where nobody reads it.
    for (auto& r : s.shards.runs) {
      auto& p = params_[r.param];
      copy_scaled(s.staging.data() + r.padded * ws, bk.wire_type,
                  static_cast<std::byte*>(p.grad) + r.param_offset * ps, p.type, r.count, scale);
    }
    s.site = current_call;
    s.in_flight = reduce(b, s.staging.data());
  }

  /// A joined rank's stand-in: the same reduce-scatter, on zeros.
  void launch_zeros(std::size_t b) {
    auto& s = state_[b];
    s.shadow.assign(s.shards.block * static_cast<std::size_t>(comm_.size()) *
                        size_of(plan_.buckets[b].wire_type),
                    std::byte{0});
    s.site = current_call; // unnamed, as every stand-in
    s.in_flight = reduce(b, s.shadow.data());
  }

  /// Waits for every bucket's reduce-scatter (and, hybrid, starts its
  /// replicate all-reduce as soon as it is in, beside the next bucket's
  /// wait), then keeps this rank's averaged shard of each.
  void finish_all() {
    for (std::size_t b = 0; b < state_.size(); ++b)
      if (finish_scatter(b) && replicate_ && state_[b].shards.size > 0) {
        const call_site_scope named(state_[b].site);
        state_[b].replicating = replicate_->all_reduce(state_[b].recv.data(), state_[b].shards.size,
                                                       plan_.buckets[b].wire_type, op::sum, false);
      }
    for (std::size_t b = 0; b < state_.size(); ++b) {
      auto& s = state_[b];
      if (s.replicating) {
        auto w = std::move(*s.replicating);
        s.replicating.reset();
        w.wait();
      }
      auto& bk = plan_.buckets[b];
      if (s.scattered && bk.wire_type != bk.param_type)
        copy_scaled(s.grad.data(), bk.param_type, s.recv.data(), bk.wire_type, s.shards.size, 1.0);
      s.scattered = false;
    }
  }

  /// Starts bucket b's all-gather of this rank's (updated) parameter shard.
  void start_gather(std::size_t b) {
    auto& bk = plan_.buckets[b];
    auto& s = state_[b];
    const std::size_t ps = size_of(bk.param_type);
    const std::size_t mine = static_cast<std::size_t>(comm_.rank()) * s.shards.block;
    for (auto& r : s.shards.owned)
      std::memcpy(s.gather_in.data() + (r.padded - mine) * ps,
                  static_cast<const std::byte*>(params_[r.param].value) + r.param_offset * ps, r.count * ps);
    s.gathering =
        comm_.all_gather(s.gather_in.data(), s.staging.data(), s.shards.block, bk.param_type, false);
  }

  /// Waits for bucket b's all-gather and writes every rank's shard into the parameters.
  void finish_gather(std::size_t b) {
    auto& s = state_[b];
    if (!s.gathering) return;
    auto w = std::move(*s.gathering);
    s.gathering.reset();
    w.wait();
    const std::size_t ps = size_of(plan_.buckets[b].param_type);
    for (auto& r : s.shards.runs)
      std::memcpy(static_cast<std::byte*>(params_[r.param].value) + r.param_offset * ps,
                  s.staging.data() + r.padded * ps, r.count * ps);
  }

  void wait_all_quietly() {
    for (auto& s : state_) {
      wait_quietly(s.in_flight);
      wait_quietly(s.replicating);
      wait_quietly(s.gathering);
      s.scattered = false;
    }
  }

private:
  struct bucket_state {
    bucket_shards shards;
    std::vector<std::byte> staging; ///< packed gradients (wire type), then gathered parameters
    std::vector<std::byte> recv, grad, gather_in, shadow;
    std::optional<work> in_flight, replicating, gathering;
    bool scattered = false; ///< this step's reduce-scatter is in recv, not yet converted
    /// The step and bucket its reduce-scatter was launched for (and this rank's check_finite
    /// finding): the replicate all-reduce carries them too, so that the step check runs across
    /// shard groups, and at all with shard groups of one rank (no header round of their own).
    call_site site;
  };

  /// Waits for bucket b's reduce-scatter; false when none was launched.
  bool finish_scatter(std::size_t b) {
    auto& s = state_[b];
    if (!s.in_flight) return false;
    auto w = std::move(*s.in_flight);
    s.in_flight.reset();
    w.wait();
    s.scattered = true;
    return true;
  }

  work reduce(std::size_t b, std::byte* data) {
    auto& s = state_[b];
    return comm_.reduce_scatter(data, s.recv.data(), s.shards.block, plan_.buckets[b].wire_type, op::sum,
                                false);
  }

  Comm& comm_;
  Comm* replicate_; ///< null unless hybrid with more than one replica
  const bucket_plan& plan_;
  const std::vector<tensor_slot>& params_;
  std::vector<bucket_state> state_;
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_SHARDED_SHARD_ENGINE_HPP
