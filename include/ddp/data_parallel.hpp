// ddp::distributed_data_parallel — gradient averaging for any model type, in
// buckets that launch while backward is still running. The class coordinates;
// the work is done by its parts in ddp/data_parallel/: the parameter registry
// (walk, verify, follow moved storage), the bucket plan (pure: which path each
// bucket takes), the bucket engine of the gradients' memory space (pack,
// reduce, unpack), the step driver (marks, no_sync, strict_marking, join:
// shared with sharded_data_parallel) and DDP_DEBUG.
#ifndef DDP_DATA_PARALLEL_HPP
#define DDP_DATA_PARALLEL_HPP

#include <ddp/bucketing.hpp>
#include <ddp/data_parallel/gradient_sink.hpp>
#include <ddp/data_parallel/no_sync.hpp>
#include <ddp/data_parallel/options.hpp>
#include <ddp/detail/common/log.hpp>
#include <ddp/detail/common/message.hpp>
#include <ddp/detail/data_parallel/attached_model.hpp>
#include <ddp/detail/data_parallel/bucket_engine.hpp>
#include <ddp/detail/data_parallel/bucket_order.hpp>
#include <ddp/detail/data_parallel/bucket_plan.hpp>
#include <ddp/detail/data_parallel/debug.hpp>
#include <ddp/detail/data_parallel/device_broadcasts.hpp>
#include <ddp/detail/data_parallel/gloo_instances.hpp>
#include <ddp/detail/data_parallel/parameter_registry.hpp>
#include <ddp/detail/data_parallel/policy_diagnostics.hpp>
#include <ddp/detail/data_parallel/sample_weight.hpp>
#include <ddp/detail/data_parallel/step_driver.hpp>
#include <ddp/detail/data_parallel/timeline.hpp>
#include <ddp/model.hpp>
#include <ddp/process_group.hpp>
#include <ddp/reduction.hpp>

#include <functional>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>

DDP_BEGIN_NAMESPACE

/// The primary template only diagnoses: it is chosen when an argument is not
/// what it should be, and says which one and how to fix it, once.
template <class Model, class Backend, class Bucketing = bucketing::size_capped<>,
          class Reduction = reduction::mean>
class distributed_data_parallel : detail::policy_diagnostics<Model, Backend, Bucketing, Reduction> {
public:
  template <class... Args> explicit distributed_data_parallel(Args&&...) {}
};

template <class Model, class Backend, class Bucketing, class Reduction>
requires model<Model> && backend_policy<Backend> && bucketing_policy<Bucketing> && reduction_policy<Reduction>
class distributed_data_parallel<Model, Backend, Bucketing, Reduction> {
  using comm_type = typename Backend::communicator;

public:
  using model_type = Model;
  using backend_type = Backend;

  /// Verifies the model across ranks (names, dtypes, sizes), then copies rank 0's
  /// parameters and buffers to every rank.
  distributed_data_parallel(Model& m, process_group<Backend>& pg, ddp_options o = {})
      : model_(m), pg_(pg), opts_(o), attached_(m), registry_(attached_.walked(), pg.rank()),
        on_device_(gradients_on_device()), broadcasts_(pg.communicator(), o.compute_stream, fail_group()),
        plan_(verify_then_plan()), timeline_(plan_),
        engine_(detail::make_bucket_engine(pg.communicator(), plan_, registry_.parameters(), on_device_,
                                           o.compute_stream, fail_group())),
        step_(*this, pg.communicator(), pg.lifetime(), opts_, attached_, registry_, plan_) {
    if (detail::debug() >= detail::debug_level::info && pg_.rank() == 0)
      detail::log_bucket_layout(plan_, registry_.parameters());
    step_.record_ready_order(true);
    attached_.connect(gradient_sink(*this));
  }
  distributed_data_parallel(const distributed_data_parallel&) = delete;
  distributed_data_parallel& operator=(const distributed_data_parallel&) = delete;

  Model& module() noexcept { return model_; }
  process_group<Backend>& group() noexcept { return pg_; }
  std::size_t num_parameters() const noexcept { return registry_.size(); }
  const std::string& parameter_name(std::size_t i) const { return registry_.parameters().at(i).name; }
  /// The index of the parameter called `name`.
  std::size_t parameter_index(std::string_view name) const { return registry_.index(name); }

  /// The buckets in launch order: the policy's registration-order layout,
  /// then, after the first step that communicates, the one rebuilt in
  /// backward's order (ddp_options::pin_bucket_order; docs/bucketing.md).
  std::vector<bucket_info> buckets() const {
    std::vector<bucket_info> out;
    for (auto& b : plan_.buckets)
      out.push_back({b.params, b.param_type, b.wire_type, b.elements, b.path});
    return out;
  }
  /// How many of this step's buckets have started their collective so far (0
  /// outside a step): a bucket launched while backward still runs shows here.
  std::size_t buckets_launched() const noexcept { return step_.launched(); }

  /// Gradient `index` (registration order) is final for this step; a bucket
  /// whose gradients are all final starts its all-reduce, in bucket order.
  void mark_grad_ready(std::size_t index) { step_.mark(index, detail::mark_state::ready); }
  template <tensor G> void mark_grad_ready(const G& grad) { step_.mark(grad, detail::mark_state::ready); }

  /// This rank has no gradient for `index` this step (a branch it did not take):
  /// its gradient is zeroed, contributes zeros, and still receives the average.
  void mark_unused(std::size_t index) { step_.mark(index, detail::mark_state::unused); }
  /// Whether gradient `index` was marked (ready or unused) in the step under way.
  bool marked(std::size_t index) const { return step_.marked(index); }
  template <tensor G> void mark_unused(const G& grad) { step_.mark(grad, detail::mark_state::unused); }

  /// Launches what is left (unmarked gradients count as ready unless
  /// strict_marking), waits, and leaves the reduced gradients in the model's
  /// gradient tensors on every rank. Inside no_sync(), does nothing but end the step.
  /// Device gradients with ddp_options::compute_stream: stream-ordered, the
  /// compute stream waits on the device for the reduced gradients. Over
  /// ddp::nccl the host waits for none of it (only until each bucket's
  /// collective is queued; a failure found later is thrown by the next
  /// synchronize() or collective, or logged when this object goes; device
  /// buffers are broadcast the same way); over ddp::gloo it waits for each
  /// bucket's collective (it runs on the host), not for the copies back.
  void synchronize() { synchronize_impl(/*blocking=*/false); }

  /// synchronize(), and the host also waits until the reduced gradients are in
  /// place in device memory (the same as synchronize() for host gradients).
  void synchronize_blocking() { synchronize_impl(/*blocking=*/true); }

  /// Uneven shares of a global batch: this rank's gradients are a mean over
  /// `local` samples, the step's whole batch has `global` (the sum over the
  /// ranks; every rank passes the same). The next synchronize() that
  /// communicates then leaves the sample-weighted global mean, sum_r n_r g_r /
  /// global, instead of the mean over ranks (with reduction::sum: the same, as
  /// a sum of n_r g_r / global). Call it before the step's first bucket leaves
  /// (before backward's first mark); it holds for that one synchronize(). Even
  /// shares (local = global / size) change nothing; otherwise each bucket's
  /// gradients are scaled once on this rank before they leave it. Host
  /// gradients only.
  void set_samples(std::size_t local, std::size_t global) {
    step_.check_group();
    if (step_.launched() > 0)
      detail::throw_error(
          error_kind::config,
          {"rank ", pg_.rank(),
           ": set_samples() after a bucket of this step started its reduction: call it before "
           "backward (before the step's first mark_grad_ready)"},
          pg_.rank());
    if (on_device_)
      detail::throw_error(error_kind::config,
                          {"rank ", pg_.rank(),
                           ": set_samples() needs host gradients; with device gradients, scale the loss by "
                           "local / global samples and use reduction::sum"},
                          pg_.rank());
    sample_weight_ = detail::sample_weight(local, global, pg_.size(), Reduction::average, pg_.rank());
  }

private:
  void synchronize_impl(bool blocking) {
    auto traced = timeline_.synchronizing(/*communicates=*/!step_.accumulating());
    const bool communicated = step_.synchronize(
        [&] {
          launch_ready(/*in_synchronize=*/true);
          for (std::size_t b = 0; b < plan_.buckets.size(); ++b)
            finish(b);
          engine([&](auto& e) { e.finish_step(blocking); });
          if (opts_.broadcast_buffers && !registry_.buffers().empty())
            broadcast_buffers(/*stream_ordered=*/!blocking);
          if (detail::debug() >= detail::debug_level::detail && pg_.rank() == 0)
            engine([&](auto& e) { detail::log_step_timing(e, plan_.buckets.size()); });
        },
        [&] {
          sample_weight_ = 1.0;
          engine([](auto& e) { e.wait_all_quietly(); });
        });
    if (communicated) {
      sample_weight_ = 1.0;
      timeline_.step_done();
      settle_bucket_order(step_.steps());
    }
  }

  /// Once, after the first step that communicated (or a joined rank's shadow
  /// of it), between steps: the buckets are laid out again in the order
  /// backward marked the gradients on rank 0, every rank alike
  /// (detail/data_parallel/bucket_order.hpp). `step`: the step just finished.
  void settle_bucket_order(std::uint32_t step) {
    if (bucket_order_settled_) return;
    bucket_order_settled_ = true;
    const auto ready = step_.ready_order();
    step_.record_ready_order(false);
    detail::ordered_assign assign = nullptr;
    if constexpr (reorderable_bucketing_policy<Bucketing>)
      assign = [](std::span<const parameter_desc> p, std::span<const std::size_t> o) {
        return Bucketing::assign(p, o);
      };
    const char* fixed = !assign
                            ? "the bucketing policy has no ordered form (ddp::reorderable_bucketing_policy)"
                        : on_device_ ? "device gradients keep their first buckets"
                                     : nullptr;
    auto* host = std::get_if<detail::host_bucket_engine<comm_type>>(&engine_); // null: device gradients
    std::optional<detail::bucket_plan> next;
    try {
      next = detail::agree_on_bucket_order(
          plan_,
          {registry_.parameters(), ready, assign, [](dtype d) { return Reduction::wire(d); },
           detail::bucket_engine_capabilities<comm_type>(on_device_), fixed, opts_.pin_bucket_order,
           pg_.rank(), pg_.size(), step},
          [&](const std::int64_t* mine, std::int64_t* all, std::size_t n) {
            comm().all_gather(mine, all, n, dtype::i64, true).wait();
          },
          [&](const detail::bucket_plan& p) { // aside: what is in use stays, should this throw
            step_.prepare_plan(p);
            timeline_.prepare_plan(p);
            std::get<detail::host_bucket_engine<comm_type>>(engine_).prepare_plan(p);
          });
    } catch (...) {
      if (host) host->discard_prepared(); // the new buffers go with the new buckets: no rank takes them
      throw;
    }
    if (!next) return;
    // Every rank laid out the new buckets aside: nothing from here on can fail.
    static_assert(std::is_nothrow_move_assignable_v<detail::bucket_plan>);
    plan_ = std::move(*next);
    step_.plan_changed();
    timeline_.plan_changed();
    std::get<detail::host_bucket_engine<comm_type>>(engine_).adopt_prepared();
  }

public:
  /// While the guard lives, gradients accumulate locally: marks are ignored
  /// and synchronize() communicates nothing.
  using no_sync_guard = ddp::no_sync_guard;
  [[nodiscard]] no_sync_guard no_sync() { return no_sync_guard(step_.no_sync_depth()); }

  /// Copies rank 0's buffers (running statistics and such) to every rank;
  /// returns once they are in place (device buffers too).
  void sync_buffers() {
    step_.check_group();
    broadcast_buffers(/*stream_ordered=*/false);
  }

  /// For uneven inputs (options.uneven_inputs on every rank): a rank that has
  /// run out of data calls join(). Until every rank has joined, it shadows the
  /// others' steps, contributing zero gradients, so their collectives complete.
  /// Averages keep dividing by the full world size: joined ranks count as zeros.
  void join() {
    auto shadow_step = [&] {
      std::vector<work> ws;
      for (std::size_t b = 0; b < plan_.buckets.size(); ++b) {
        if (detail::debug() >= detail::debug_level::detail)
          detail::check_same_bucket_everywhere(comm(), b, plan_.buckets[b]); // as launch does
        // The ring averages the chunks this rank owns, as in a step.
        ws.push_back(engine([&](auto& e) { return e.reduce_zeros(b, mean_scale()); }));
      }
      for (auto& w : ws)
        w.wait();
      if (opts_.broadcast_buffers && !registry_.buffers().empty()) sync_buffers();
      // As the ranks still training do after their first step, unnamed (step 0) as the stand-ins.
      settle_bucket_order(0);
    };
    step_.join(/*prepare=*/[&] { engine([](auto& e) { e.prepare_join(); }); }, shadow_step);
  }

private:
  comm_type& comm() noexcept { return pg_.communicator(); }
  /// Calls `f` with the engine of the gradients' memory space.
  template <class F> decltype(auto) engine(F&& f) { return std::visit(std::forward<F>(f), engine_); }

  /// For this rank's own device work before a collective (packing, staging
  /// copies): when it fails, the peers waiting in that collective are told
  /// at once (process_group::abort) instead of at their deadline.
  std::function<void(const std::string&)> fail_group() {
    return [&pg = pg_](const std::string& why) { pg.abort(why); };
  }

  /// `stream_ordered`: the compute stream, not the host, waits for device
  /// buffers (synchronize() with a compute stream, over ddp::nccl).
  void broadcast_buffers(bool stream_ordered) {
    if (!step_.started()) step_.refresh(); // inside a step, its beginning did
    if (registry_.any_on_device()) broadcasts_.begin(stream_ordered);
    registry_.broadcast_from_rank0(comm(), /*buffers_only=*/true, broadcasts_);
  }
  double mean_scale() const { return Reduction::average ? 1.0 / pg_.size() : 1.0; }

  /// Where the gradients live picks the bucket engine: all on the host or all
  /// on the device (the CUDA engine, where ddp was compiled with it).
  bool gradients_on_device() const {
    const bool dev = registry_.gradients_on_device(pg_.rank());
    if (registry_.any_on_device() && !detail::cuda_engine_available)
      detail::throw_error(
          error_kind::config,
          {"rank ", pg_.rank(),
           ": the model has tensors in device memory but ddp was compiled without its CUDA engine: "
           "link ddp::cuda or ddp::nccl (they define DDP_WITH_CUDA)"},
          pg_.rank());
    return dev;
  }

  /// Construction, in order: the model and ddp_options::pin_bucket_order are
  /// checked (the same on every rank; descriptions only, no tensor data), rank 0's state is copied
  /// everywhere, then the buckets are planned.
  detail::bucket_plan verify_then_plan() {
    // The options every rank must share travel with the model's description: no collective of
    // their own. With verify_model off, the bucket rebuild's exchange still checks the pin.
    if (opts_.verify_model)
      registry_.verify_across_ranks(comm(), opts_.pin_bucket_order ? "pin_bucket_order=on\n"
                                                                   : "pin_bucket_order=off\n");
    if (registry_.any_on_device())
      broadcasts_.begin(/*stream_ordered=*/false); // a failure is the constructor's
    registry_.broadcast_from_rank0(comm(), /*buffers_only=*/false, broadcasts_);
    auto descs = detail::describe_for_bucketing(registry_.parameters());
    return detail::make_bucket_plan(
        Bucketing::assign(std::span<const parameter_desc>(descs)), registry_.parameters(),
        [](dtype d) { return Reduction::wire(d); },
        detail::bucket_engine_capabilities<comm_type>(on_device_));
  }

  // The step driver's hooks (detail/data_parallel/step_driver.hpp).
  friend detail::step_driver<distributed_data_parallel, comm_type, Model>;
  static constexpr detail::call_kind step_call = detail::call_kind::ddp_synchronize;
  /// This rank fails mid-step on its own: the peers in the step's collectives fail now, naming it.
  void abort_group(const std::string& why) noexcept { pg_.abort(why); }
  /// Moved gradient storage: new addresses, maybe new bucket paths.
  void storage_moved() {
    auto next = plan_;
    detail::choose_paths(next, registry_.parameters(),
                         detail::bucket_engine_capabilities<comm_type>(on_device_));
    if (auto* host = std::get_if<detail::host_bucket_engine<comm_type>>(&engine_)) {
      // Aside, then swapped in: a throw leaves the plan and its buffers as they were (the step
      // driver lays out again at the next step), never a packed bucket without its buffer.
      host->prepare_plan(next);
      plan_ = std::move(next);
      host->adopt_prepared();
    } else {
      plan_ = std::move(next);
      engine([](auto& e) { e.layout(); });
    }
  }
  void zero_gradient(std::size_t index) {
    engine([&](auto& e) { e.zero(registry_[index]); });
  }
  void gradient_marked(std::size_t index, detail::mark_state how) {
    timeline_.marked(index, how == detail::mark_state::unused);
    launch_ready();
  }

  /// Waits for bucket b (if launched) and unpacks it into the gradients.
  void finish(std::size_t b) {
    {
      auto traced = timeline_.waiting(b);
      if (!engine([&](auto& e) { return e.wait(b); })) return;
    }
    {
      auto traced = timeline_.unpacking(b);
      engine([&](auto& e) { e.unpack(b); });
    }
    timeline_.completed(b);
  }

  /// Starts every complete bucket, strictly in bucket order. With host
  /// gradients the step's last bucket waits for synchronize(), which waits for
  /// it at once: the communicator may then run it on the caller's thread (when
  /// its queue is idle), without the two thread hand-offs of a queued
  /// collective. Those cost a scheduler slice each on a busy host, a large part
  /// of a small step (docs/performance.md, Training). Nothing
  /// runs after the last gradient but the caller's own code before
  /// synchronize(), so only that code loses the overlap.
  void launch_ready(bool in_synchronize = false) {
    const std::size_t n = plan_.buckets.size(), last = n == 0 ? 0 : n - 1;
    engine([&]<class E>(E& e) {
      constexpr bool defer_last = E::defers_last_bucket;
      step_.launch_ready(
          [&](std::size_t b) {
            if (detail::debug() >= detail::debug_level::detail)
              detail::check_same_bucket_everywhere(comm(), b, plan_.buckets[b]);
            auto traced = timeline_.launching(b);
            if (sample_weight_ != 1.0)
              detail::weigh_bucket(plan_.buckets[b], registry_.parameters(), sample_weight_);
            e.launch(b, mean_scale(), /*caller_waits=*/defer_last && b == last);
          },
          in_synchronize || !defer_last ? n : last);
    });
  }

  Model& model_;
  process_group<Backend>& pg_;
  ddp_options opts_;
  detail::attached_model<Model> attached_; ///< what registry_ walks: the model, or its traits' adapter
  detail::parameter_registry<typename detail::attached_model<Model>::walked_type> registry_;
  bool on_device_;                                  ///< gradients in device memory: the CUDA engine
  detail::device_broadcasts<comm_type> broadcasts_; ///< device tensors in broadcasts from rank 0
  detail::bucket_plan plan_;
  detail::step_timeline timeline_;
  detail::bucket_engine<comm_type> engine_;
  detail::step_driver<distributed_data_parallel, comm_type, Model> step_; ///< marks, no_sync, join
  double sample_weight_ = 1.0;        ///< set_samples(): this rank's factor for the next communicated step
  bool bucket_order_settled_ = false; ///< the buckets were rebuilt in backward's order, or kept
};

template <class M, class B>
distributed_data_parallel(M&, process_group<B>&) -> distributed_data_parallel<M, B>;
template <class M, class B>
distributed_data_parallel(M&, process_group<B>&, ddp_options) -> distributed_data_parallel<M, B>;

DDP_END_NAMESPACE

#endif // DDP_DATA_PARALLEL_HPP
