// ddp::sharded_data_parallel — ZeRO stage 1: gradients are reduce-scattered
// in buckets that launch while backward runs, each rank keeps and updates
// only its 1/W of the parameters' elements (and so of the optimizer's state),
// and the updated shards are all-gathered so that every rank holds the whole
// model again. Same models, policies and options as distributed_data_parallel
// (its step driver: marks, no_sync, strict_marking, join), except
// compute_stream, for device gradients; the optimizers that go with it are in
// ddp/optim/. Hybrid sharding (FSDP's HSDP): over a shard group and a
// replicate group (ddp/hybrid_groups.hpp), the state is cut within the shard
// group and the shards' gradients averaged across the replicate group.
#ifndef DDP_SHARDED_DATA_PARALLEL_HPP
#define DDP_SHARDED_DATA_PARALLEL_HPP

#include <ddp/bucketing.hpp>
#include <ddp/data_parallel/gradient_sink.hpp>
#include <ddp/data_parallel/no_sync.hpp>
#include <ddp/data_parallel/options.hpp>
#include <ddp/detail/common/message.hpp>
#include <ddp/detail/data_parallel/attached_model.hpp>
#include <ddp/detail/data_parallel/bucket_plan.hpp>
#include <ddp/detail/data_parallel/gloo_instances.hpp>
#include <ddp/detail/data_parallel/parameter_registry.hpp>
#include <ddp/detail/data_parallel/policy_diagnostics.hpp>
#include <ddp/detail/data_parallel/step_driver.hpp>
#include <ddp/detail/sharded/hybrid_tiling.hpp>
#include <ddp/detail/sharded/shard_engine.hpp>
#include <ddp/hybrid_groups.hpp>
#include <ddp/model.hpp>
#include <ddp/process_group.hpp>
#include <ddp/reduction.hpp>

#include <cmath>
#include <span>
#include <string>

DDP_BEGIN_NAMESPACE

/// One range of parameter elements this rank owns: what an optimizer updates.
template <class T> struct shard_range {
  std::size_t parameter;    ///< registration index
  std::size_t offset;       ///< first element within the parameter
  std::span<T> value;       ///< the parameter's elements, updated in place
  std::span<const T> grad;  ///< their gradient, averaged over all ranks (the world's, under hybrid)
  std::size_t bucket;       ///< the bucket it belongs to
  std::size_t state_offset; ///< its position in this rank's shard of that bucket (for optimizer state)
};

/// The primary template only diagnoses, as distributed_data_parallel's does.
template <class Model, class Backend, class Bucketing = bucketing::size_capped<>,
          class Reduction = reduction::mean>
class sharded_data_parallel : detail::policy_diagnostics<Model, Backend, Bucketing, Reduction> {
public:
  template <class... Args> explicit sharded_data_parallel(Args&&...) {}
};

template <class Model, class Backend, class Bucketing, class Reduction>
requires model<Model> && backend_policy<Backend> && bucketing_policy<Bucketing> && reduction_policy<Reduction>
class sharded_data_parallel<Model, Backend, Bucketing, Reduction> {
  using comm_type = typename Backend::communicator;

public:
  using model_type = Model;
  using backend_type = Backend;

  /// Verifies the model across ranks, copies rank 0's parameters and buffers
  /// to every rank, and cuts each bucket into W shards. The options are
  /// distributed_data_parallel's; compute_stream, for device gradients, is refused.
  sharded_data_parallel(Model& m, process_group<Backend>& pg, ddp_options o = {})
      : sharded_data_parallel(m, pg, pg, nullptr, o) {}

  /// Hybrid sharding: the state is cut into `shard.size()` shards within
  /// `shard`; each shard's gradient is reduce-scattered within `shard`, then
  /// all-reduced across `replicate` (the ranks that hold the same shard in the
  /// other shard groups): the average is over every rank of `pg`, divided by
  /// pg.size() once. Parameters are all-gathered within `shard` only.
  /// Collective over `pg`; the groups must tile it (each rank in one shard group
  /// of S ranks and one replicate group of R, S × R = pg.size(), a replicate
  /// group holding the same shard rank of every shard group): otherwise
  /// ddp::error(config) on every rank, naming the ranks. Every group must
  /// outlive this object. make_hybrid_groups() builds them from the topology.
  sharded_data_parallel(Model& m, process_group<Backend>& pg, process_group<Backend>& shard,
                        process_group<Backend>& replicate, ddp_options o = {})
      : sharded_data_parallel(m, pg, shard, &replicate, o) {}
  sharded_data_parallel(Model& m, process_group<Backend>& pg, hybrid_groups<Backend>& groups,
                        ddp_options o = {})
      : sharded_data_parallel(m, pg, groups.shard, &groups.replicate, o) {}
  sharded_data_parallel(const sharded_data_parallel&) = delete;
  sharded_data_parallel& operator=(const sharded_data_parallel&) = delete;

  Model& module() noexcept { return model_; }
  process_group<Backend>& group() noexcept { return pg_; }
  /// The group the state is cut within and the parameters gathered over:
  /// group() itself unless hybrid.
  process_group<Backend>& shard_group() noexcept { return shard_pg_; }
  /// The group a shard's gradient is averaged across under hybrid sharding; null otherwise.
  process_group<Backend>* replicate_group() noexcept { return replicate_pg_; }
  bool hybrid() const noexcept { return replicate_pg_ != nullptr; }
  std::size_t num_parameters() const noexcept { return registry_.size(); }
  const std::string& parameter_name(std::size_t i) const { return registry_.parameters().at(i).name; }
  std::size_t num_buckets() const noexcept { return plan_.buckets.size(); }
  /// This rank's elements of bucket b (the parameters' dtype: float or double).
  std::size_t shard_size(std::size_t b) const { return engine_.shards(b).size; }
  dtype bucket_type(std::size_t b) const { return plan_.buckets.at(b).param_type; }
  /// This rank's elements over all buckets: 1/S of the model (S: the shard
  /// group's size, the world's unless hybrid), within one per bucket.
  /// Bytes held for the collectives: the packing/gathering buffers (about one
  /// model's worth in the wire or parameter dtype, whichever is wider) and the shards.
  std::size_t buffer_bytes() const { return engine_.buffer_bytes(); }
  std::size_t shard_elements() const {
    std::size_t n = 0;
    for (std::size_t b = 0; b < plan_.buckets.size(); ++b)
      n += engine_.shards(b).size;
    return n;
  }

  /// As distributed_data_parallel's: gradient `index` (or `grad`) is final
  /// for this step; a bucket whose gradients are all final starts its reduce-scatter.
  void mark_grad_ready(std::size_t index) { step_.mark(index, detail::mark_state::ready); }
  template <tensor G> void mark_grad_ready(const G& grad) { step_.mark(grad, detail::mark_state::ready); }
  /// This rank has no gradient for `index` this step: it contributes zeros.
  void mark_unused(std::size_t index) { step_.mark(index, detail::mark_state::unused); }
  /// Whether gradient `index` was marked (ready or unused) in the step under way.
  bool marked(std::size_t index) const { return step_.marked(index); }
  template <tensor G> void mark_unused(const G& grad) { step_.mark(grad, detail::mark_state::unused); }

  /// Launches what is left (unmarked gradients count as ready unless
  /// strict_marking) and waits: each rank then holds the averaged gradient of
  /// its shard, for for_each_shard(). The model's own gradients are left as
  /// backward made them. Inside no_sync(), does nothing but end the step.
  /// After one that failed, the optimizer's step is refused.
  void synchronize() {
    synchronized_ = false;
    const bool communicated = step_.synchronize(
        [&] {
          launch_ready();
          engine_.finish_all();
          if (opts_.broadcast_buffers && !registry_.buffers().empty())
            registry_.broadcast_from_rank0(pg_.communicator(), /*buffers_only=*/true, host_only_);
        },
        [&] {
          // Under hybrid a peer of the other group may be waiting in its collective for this
          // rank (a replicate all-reduce this rank never starts): fail it now, naming why.
          if (replicate_pg_) abort_group(failure_text());
          engine_.wait_all_quietly();
        });
    synchronized_ = communicated;
  }

  /// Calls f(shard_range<T>&) for every range this rank owns (T: float or
  /// double, the parameter's type), bucket by bucket.
  template <class F> void for_each_shard(F&& f) {
    for (std::size_t b = 0; b < plan_.buckets.size(); ++b)
      visit_bucket(b, f);
  }

  /// Scales the averaged gradient shards so that the whole gradient's 2-norm
  /// (over all ranks) is at most `max_norm` (torch.nn.utils.clip_grad_norm_);
  /// returns the norm before clipping. Between synchronize() and the step: the
  /// model's own gradients are not the averaged ones here.
  double clip_grad_norm(double max_norm) {
    step_.check_group();
    if (!synchronized_)
      detail::throw_error(error_kind::config, {"rank ", pg_.rank(),
                                               ": clip_grad_norm() before synchronize(): the shards hold no "
                                               "averaged gradient yet"});
    std::vector<double> sum{0.0};
    for (std::size_t b = 0; b < plan_.buckets.size(); ++b)
      with_grad_shard(b, [&](auto* g, std::size_t n) {
        for (std::size_t i = 0; i < n; ++i)
          sum[0] += static_cast<double>(g[i]) * static_cast<double>(g[i]);
      });
    shard_pg_.all_reduce(sum); // every replica holds the same shards: one of them counts
    const double norm = std::sqrt(sum[0]), factor = max_norm / (norm + 1e-6);
    if (factor < 1.0)
      for (std::size_t b = 0; b < plan_.buckets.size(); ++b)
        with_grad_shard(b, [&](auto* g, std::size_t n) {
          using T = std::remove_pointer_t<decltype(g)>;
          for (std::size_t i = 0; i < n; ++i)
            g[i] = static_cast<T>(g[i] * static_cast<T>(factor));
        });
    return norm;
  }

  /// Copies every rank's shard of the parameters to every rank.
  void gather_parameters() {
    for (std::size_t b = 0; b < plan_.buckets.size(); ++b)
      engine_.start_gather(b);
    finish_gathers();
  }

  /// for_each_shard(f), starting each bucket's all-gather as soon as its
  /// ranges are updated (it overlaps the updates of the next bucket); returns
  /// with the parameters whole on every rank. What ddp::optim's step() calls.
  template <class F> void update_shards(F&& f) {
    if (!synchronized_)
      detail::throw_error(error_kind::config, {"rank ", pg_.rank(),
                                               ": an optimizer step before synchronize(): the shards hold no "
                                               "averaged gradient yet"});
    synchronized_ = false; // a failed update is not retried on the same gradients
    try {
      for (std::size_t b = 0; b < plan_.buckets.size(); ++b) {
        visit_bucket(b, f);
        engine_.start_gather(b);
      }
    } catch (const std::exception& e) {
      // Peers wait in this step's later all-gathers: fail them now, not at their deadline.
      abort_group(detail::message({"rank ", pg_.rank(), ": the optimizer step failed: ", e.what()}));
      engine_.wait_all_quietly();
      throw;
    }
    finish_gathers();
  }

  /// While the guard lives, gradients accumulate locally: marks are ignored
  /// and synchronize() communicates nothing.
  using no_sync_guard = ddp::no_sync_guard;
  [[nodiscard]] no_sync_guard no_sync() { return no_sync_guard(step_.no_sync_depth()); }

  /// For uneven inputs (options.uneven_inputs on every rank): a rank out of
  /// data calls join(optimizer). Until every rank has joined it shadows the
  /// others' steps: zeros into their reduce-scatters, and its optimizer's
  /// step on its own shard, whose all-gather the others wait for.
  template <class Optimizer> void join(Optimizer& opt) {
    auto shadow_step = [&] {
      for (std::size_t b = 0; b < plan_.buckets.size(); ++b)
        engine_.launch_zeros(b);
      engine_.finish_all();
      if (opts_.broadcast_buffers && !registry_.buffers().empty()) // as synchronize() does
        registry_.broadcast_from_rank0(pg_.communicator(), /*buffers_only=*/true, host_only_);
      synchronized_ = true;
      opt.step();
    };
    step_.join(/*prepare=*/[] {}, shadow_step);
  }

private:
  /// Buffers are host memory here: broadcast directly.
  struct host_broadcasts {
    static work broadcast(const detail::tensor_slot&) {
      detail::throw_error(error_kind::config,
                          {"sharded_data_parallel: device tensors are not supported yet"});
    }
    static void complete(std::vector<work>& ws) {
      for (auto& w : ws)
        w.wait();
    }
  };

  template <class F> void with_grad_shard(std::size_t b, F&& f) {
    if (plan_.buckets[b].param_type == dtype::f32)
      f(reinterpret_cast<float*>(engine_.grad_shard(b)), engine_.shards(b).size);
    else
      f(reinterpret_cast<double*>(engine_.grad_shard(b)), engine_.shards(b).size);
  }

  template <class F> void visit_bucket(std::size_t b, F& f) {
    auto& bk = plan_.buckets[b];
    auto& sh = engine_.shards(b);
    auto visit = [&](auto* grad_shard) {
      using T = std::remove_pointer_t<decltype(grad_shard)>;
      for (auto& r : sh.owned) {
        auto& p = registry_[r.param];
        const std::size_t at = r.padded - static_cast<std::size_t>(shard_pg_.rank()) * sh.block;
        shard_range<T> range{r.param,
                             r.param_offset,
                             std::span<T>(static_cast<T*>(p.value) + r.param_offset, r.count),
                             std::span<const T>(grad_shard + at, r.count),
                             b,
                             at};
        f(range);
      }
    };
    if (bk.param_type == dtype::f32)
      visit(reinterpret_cast<float*>(engine_.grad_shard(b)));
    else
      visit(reinterpret_cast<double*>(engine_.grad_shard(b)));
  }

  void finish_gathers() {
    try {
      for (std::size_t b = 0; b < plan_.buckets.size(); ++b)
        engine_.finish_gather(b);
    } catch (...) {
      engine_.wait_all_quietly();
      throw;
    }
  }

  sharded_data_parallel(Model& m, process_group<Backend>& pg, process_group<Backend>& shard,
                        process_group<Backend>* replicate, ddp_options o)
      : model_(m), pg_(pg), shard_pg_(shard), replicate_pg_(replicate), opts_(o), attached_(m),
        registry_(attached_.walked(), pg.rank()), plan_(verify_then_plan()),
        engine_(shard.communicator(), replicate ? &replicate->communicator() : nullptr, plan_,
                registry_.parameters()),
        step_(*this, pg.communicator(), pg.lifetime(), opts_, attached_, registry_, plan_) {
    attached_.connect(gradient_sink(*this));
  }

  /// Every rank's view of its two groups, gathered over the world: the same
  /// verdict on every rank, so a layout that does not tile fails everywhere at once.
  void check_tiling() {
    if (!replicate_pg_) return;
    auto side = [](process_group<Backend>& g) {
      return detail::hybrid_side{g.is_member(), g.rank(), g.size(), &g.name(), &g.global_ranks()};
    };
    auto mine = detail::hybrid_record(side(shard_pg_), side(*replicate_pg_), pg_.global_ranks());
    std::vector<std::int64_t> all(mine.size() * static_cast<std::size_t>(pg_.size()));
    pg_.all_gather(mine, all);
    const std::string problem = detail::hybrid_tiling_problem(all, pg_.size());
    if (!problem.empty())
      detail::throw_error(
          error_kind::config,
          {"sharded_data_parallel on rank ", pg_.rank(),
           ": the shard and replicate groups do not tile the world of ", pg_.size(), " ranks: ", problem,
           ". Each rank must pass one shard group of S ranks and one replicate group of R ranks "
           "(S x R = world), a replicate group holding the same shard rank of every shard group: "
           "ddp::make_hybrid_groups(pg) builds them from the topology"},
          pg_.rank());
  }

  detail::bucket_plan verify_then_plan() {
    check_tiling();
    if (opts_.compute_stream)
      detail::throw_error(error_kind::config,
                          {"rank ", pg_.rank(),
                           ": ddp_options::compute_stream is for gradients in device memory, and "
                           "sharded_data_parallel takes host tensors: leave it null (use "
                           "distributed_data_parallel on the GPU)"},
                          pg_.rank());
    for (auto& p : registry_.parameters()) {
      if (p.on_device)
        detail::throw_error(error_kind::config,
                            {"rank ", pg_.rank(), ": parameter '", p.name,
                             "' lives in device memory: sharded_data_parallel takes host "
                             "tensors for now (use distributed_data_parallel on the GPU)"});
      if (p.type != dtype::f32 && p.type != dtype::f64)
        detail::throw_error(
            error_kind::config,
            {"rank ", pg_.rank(), ": parameter '", p.name, "' is ", to_string(p.type),
             ": sharded_data_parallel updates float32 or float64 parameters (keep half-precision "
             "parameters as float32 and use reduction::fp16_compressed_mean or "
             "bf16_compressed_mean to halve the traffic)"});
    }
    for (auto& s : registry_.buffers())
      if (s.on_device)
        detail::throw_error(error_kind::config,
                            {"buffer '", s.name, "' lives in device memory: not supported yet"});
    if (opts_.verify_model) registry_.verify_across_ranks(pg_.communicator());
    registry_.broadcast_from_rank0(pg_.communicator(), /*buffers_only=*/false, host_only_);
    auto descs = detail::describe_for_bucketing(registry_.parameters());
    return detail::make_bucket_plan(Bucketing::assign(std::span<const parameter_desc>(descs)),
                                    registry_.parameters(), [](dtype d) { return Reduction::wire(d); }, {});
  }

  double mean_scale() const { return Reduction::average ? 1.0 / pg_.size() : 1.0; }
  /// What failed this rank's synchronize(), from inside its handler.
  std::string failure_text() const {
    std::string why = detail::message({"rank ", pg_.rank(), ": sharded_data_parallel::synchronize failed"});
    try {
      if (auto e = std::current_exception()) std::rethrow_exception(e);
    } catch (const std::exception& e) { why += std::string(": ") + e.what(); } catch (...) {
    }
    return why;
  }

  // The step driver's hooks (detail/data_parallel/step_driver.hpp).
  friend detail::step_driver<sharded_data_parallel, comm_type, Model>;
  static constexpr detail::call_kind step_call = detail::call_kind::sharded_synchronize;
  /// This rank fails mid-step on its own: the peers in the step's collectives fail now, naming it.
  /// Under hybrid, peers may wait in the shard or replicate group's collectives: those fail too,
  /// but only pg_ reports the failure (the launcher's note, the store, the log): one failure, one
  /// report. The subgroups share pg_'s store, whose report reaches their peers' failure watches.
  /// Refused first, interrupted last, as process_group::abort does (docs/design-notes.md,
  /// "Note [leaving on an error]").
  void abort_group(const std::string& why) noexcept {
    if (!replicate_pg_) return pg_.abort(why);
    using comm_t = typename Backend::communicator;
    comm_t* subgroups[2] = {&shard_pg_.communicator(), &replicate_pg_->communicator()};
    for (auto*& c : subgroups)
      if (c->poisoned()) c = nullptr; // failed already: its peers heard
    if constexpr (requires(comm_t & c) { c.poison_for_failure(why); })
      for (auto* c : subgroups)
        if (c) try {
            c->poison_for_failure(why);
          } catch (...) {}
    pg_.abort(why);
    if constexpr (abortable_communicator<comm_t>)
      for (auto* c : subgroups)
        if (c) try {
            c->abort_for_failure(why);
          } catch (...) {}
  }
  /// The shard engine reads the registry's addresses at every launch: nothing to lay out again.
  void storage_moved() {}
  void zero_gradient(std::size_t index) { engine_.zero(registry_[index]); }
  void gradient_marked(std::size_t, detail::mark_state) { launch_ready(); }

  void launch_ready() {
    step_.launch_ready([&](std::size_t b) { engine_.launch(b, mean_scale()); }, plan_.buckets.size());
  }

  Model& model_;
  process_group<Backend>& pg_;
  process_group<Backend>& shard_pg_;     ///< pg_ unless hybrid
  process_group<Backend>* replicate_pg_; ///< null unless hybrid
  ddp_options opts_;
  detail::attached_model<Model> attached_;
  detail::parameter_registry<typename detail::attached_model<Model>::walked_type> registry_;
  host_broadcasts host_only_;
  detail::bucket_plan plan_;
  detail::shard_engine<comm_type> engine_;
  detail::step_driver<sharded_data_parallel, comm_type, Model> step_; ///< marks, no_sync, join
  bool synchronized_ = false; ///< the shards hold this step's averaged gradients
};

template <class M, class B> sharded_data_parallel(M&, process_group<B>&) -> sharded_data_parallel<M, B>;
template <class M, class B>
sharded_data_parallel(M&, process_group<B>&, ddp_options) -> sharded_data_parallel<M, B>;
template <class M, class B>
sharded_data_parallel(M&, process_group<B>&, hybrid_groups<B>&) -> sharded_data_parallel<M, B>;
template <class M, class B>
sharded_data_parallel(M&, process_group<B>&, hybrid_groups<B>&, ddp_options) -> sharded_data_parallel<M, B>;
template <class M, class B>
sharded_data_parallel(M&, process_group<B>&, process_group<B>&, process_group<B>&)
    -> sharded_data_parallel<M, B>;
template <class M, class B>
sharded_data_parallel(M&, process_group<B>&, process_group<B>&, process_group<B>&, ddp_options)
    -> sharded_data_parallel<M, B>;

DDP_END_NAMESPACE

#endif // DDP_SHARDED_DATA_PARALLEL_HPP
