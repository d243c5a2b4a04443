// The definitions behind step_driver.hpp's step_driver_core: compiled in
// every translation unit when ddp is header-only, once in the runtime when it
// is compiled separately (detail/common/linkage.hpp).
#ifndef DDP_DETAIL_DATA_PARALLEL_STEP_DRIVER_INL_HPP
#define DDP_DETAIL_DATA_PARALLEL_STEP_DRIVER_INL_HPP

#include <ddp/detail/common/log.hpp>
#include <ddp/detail/common/message.hpp>
#include <ddp/detail/data_parallel/step_driver.hpp>
#include <ddp/detail/numeric/checksum.hpp>
#include <ddp/detail/numeric/finite.hpp>

DDP_BEGIN_NAMESPACE
namespace detail {

DDP_INLINE step_driver_core::step_driver_core(call_kind step_call, int rank, int world,
                                              std::weak_ptr<const void> group, const ddp_options& opts,
                                              const parameter_slots& registry, const bucket_plan& plan)
    : step_call_(step_call), group_(std::move(group)), rank_(rank), world_(world), opts_(opts),
      registry_(registry), plan_(plan), step_(plan), last_reduced_(registry.size()),
      check_finite_(opts.check_finite) {
  std::vector<bool> empty(registry.size());
  for (std::size_t i = 0; i < registry.size(); ++i)
    empty[i] = registry[i].count == 0;
  step_.skip_empty(empty);
}

DDP_INLINE void step_driver_core::check_group() const {
  if (group_.expired())
    detail::throw_error(error_kind::config,
                        {"rank ", rank(), ": ", to_string(step_call_),
                         " (or another call of that object) ran after its process_group was destroyed: "
                         "declare the process group before the data-parallel object, so that it outlives it"},
                        rank());
}

DDP_INLINE int& step_driver_core::no_sync_depth() {
  check_group();
  if (step_.started())
    detail::throw_error(error_kind::config,
                        {"no_sync() entered in the middle of a step (gradients already marked): "
                         "enter it before backward"});
  return no_sync_depth_;
}

DDP_INLINE void step_driver_core::mark(std::size_t index, mark_state how) {
  check_group();
  ++marks_since_sync_;
  if (index >= registry_.size())
    detail::throw_error(error_kind::config,
                        {"rank ", rank(), ": parameter index ", index, " is out of range (", registry_.size(),
                         " parameters)"},
                        rank());
  if (accumulating()) return;
  begin_step();
  if (step_.is_empty(index)) return;
  if (!step_.is_pending(index))
    detail::throw_error(error_kind::config,
                        {"rank ", rank(), ": gradient of parameter '", registry_[index].name,
                         "' was marked twice in one step"},
                        rank());
  if (how == mark_state::unused) zero_gradient(index);
  last_reduced_.before_reduction(index, registry_[index]);
  step_.mark(index, how);
  if (record_ready_order_ && how == mark_state::ready) ready_order_.push_back(index);
  gradient_marked(index, how);
}

DDP_INLINE void step_driver_core::mark_storage(const void* grad, std::size_t elements, mark_state how) {
  check_group();
  if (elements == 0) {
    ++marks_since_sync_;
    if (!accumulating()) begin_step();
    return;
  }
  mark(index_of_storage(grad), how);
}

DDP_INLINE std::size_t step_driver_core::index_of_storage(const void* grad) {
  auto i = registry_.find_gradient(grad);
  // The storage may have moved since the last walk; once a bucket of this step is in flight
  // it must not be re-laid out (its collective still uses the old buffers).
  if (!i && !step_.launched_any()) {
    refresh();
    i = registry_.find_gradient(grad);
  }
  if (!i)
    detail::throw_error(
        error_kind::config,
        {"rank ", rank(),
         ": mark_grad_ready/mark_unused got a tensor that is not the gradient "
         "of any parameter (pass the gradient tensor itself, or an index)",
         (step_.launched_any() ? "; if its storage moved, move it before backward: buckets of this "
                                 "step already launched with the old addresses"
                               : "")},
        rank());
  return *i;
}

DDP_INLINE void step_driver_core::launch_complete_buckets(function_ref<void(std::size_t)> launch,
                                                          std::size_t limit) {
  if (!step_.launched_any() && !storage_checked_) check_storage_before_launch();
  step_.launch_ready(
      [&](std::size_t b) {
        call_site site{step_call_,
                       steps_ + 1,
                       static_cast<std::uint32_t>(b),
                       static_cast<std::uint32_t>(step_.buckets()),
                       repeat_,
                       certain_repeat_};
        site.parameter_name = &name_of;
        site.names = &registry_;
        if (check_finite_) site.non_finite = find_non_finite(b);
        const call_site_scope named(site);
        launch(b);
      },
      limit);
}

DDP_INLINE void step_driver_core::prepare_plan(const bucket_plan& next) {
  if (step_.started())
    detail::throw_error(error_kind::config,
                        {"internal error: the bucket plan changed in the middle of a step"});
  step_.reserve(next.buckets.size());
}

DDP_INLINE void step_driver_core::refresh() {
  if (walk_again()) layout_pending_ = true;
  if (!layout_pending_) return;
  storage_moved();
  layout_pending_ = false;
}

DDP_INLINE bool step_driver_core::synchronize(function_ref<void()> complete,
                                              function_ref<void()> on_failure) {
  check_group();
  if (accumulating()) {
    end_step(/*counted=*/true);
    return false;
  }
  const bool marked_before = step_.started();
  bool fully_marked = false;
  try {
    begin_step();
    adapter_before_synchronize();
    // Begun by synchronize() itself (no mark did): maybe a second one with nothing new to
    // reduce. Only likely, from a few elements of each gradient (after the adapter zeroed
    // what backward left undefined): the ranks decide together, in the step's first
    // bucket header (collective_header::check_round).
    if (!marked_before && world_ > 1) {
      repeat_ = last_reduced_.repeated(registry_.parameters());
      // Certain where this rank marks every gradient: none marked since the last
      // synchronize(), whose were all marked. Then a peer at its next step means this
      // rank called synchronize() alone (collective_header::check_round).
      certain_repeat_ = repeat_ && last_step_marked_ && marks_since_sync_ == 0;
    }
    fully_marked = step_.all_marked();
    // A step begun here was walked by begin_step() just now: nothing can have moved since.
    if (marked_before) check_storage_before_launch();
    storage_checked_ = true; // complete()'s first launch need not walk again
    mark_the_rest_ready();
    // Not with uneven inputs: a rank that joined stops stepping, and its parameters stay behind.
    if (debug() >= debug_level::detail && world_ > 1 && !opts_.uneven_inputs)
      compare_parameters_across_ranks();
    complete();
  } catch (...) {
    on_failure();
    end_step(/*counted=*/false);
    if (non_finite_) throw_non_finite(); // this rank's own finding, in full
    throw;
  }
  if (world_ > 1) last_reduced_.after_reduction(registry_.parameters());
  last_step_marked_ = fully_marked;
  marks_since_sync_ = 0;
  end_step(/*counted=*/true);
  return true;
}

DDP_INLINE void step_driver_core::join(function_ref<void()> prepare, function_ref<void()> shadow_step) {
  check_group();
  if (!opts_.uneven_inputs)
    detail::throw_error(error_kind::config, {"join() needs ddp_options::uneven_inputs = true on every rank"});
  if (step_.started()) detail::throw_error(error_kind::config, {"join() called in the middle of a step"});
  prepare();
  // A shadowed step is a step: the counter stays with the ranks still training.
  join_shadow_until_all_joined([&] {
    shadow_step();
    ++steps_;
  });
}

DDP_INLINE void step_driver_core::begin_step() {
  if (step_.started()) return;
  step_.start();
  if (record_ready_order_) ready_order_.clear();
  refresh();
  if (opts_.uneven_inputs) join_begin_step();
}

DDP_INLINE std::uint32_t step_driver_core::find_non_finite(std::size_t b) {
  for (std::size_t i : plan_.buckets[b].params) {
    const auto& p = registry_[i];
    if (p.on_device || step_.marked_unused(i)) continue;
    const std::size_t at = first_non_finite(p.grad, p.count, p.type);
    if (at < p.count) {
      non_finite_ = non_finite{i, at, steps_ + 1};
      return static_cast<std::uint32_t>(i + 1);
    }
  }
  return 0;
}

DDP_INLINE std::string step_driver_core::name_of(const void* registry, std::uint32_t index) {
  const auto& r = *static_cast<const parameter_slots*>(registry);
  return index < r.size() ? r[index].name : detail::message({"#", index});
}

DDP_INLINE void step_driver_core::throw_non_finite() {
  const auto f = *non_finite_;
  non_finite_.reset();
  const auto& p = registry_[f.param];
  detail::throw_error(
      error_kind::data,
      {"rank ", rank(), ": the gradient of parameter '", p.name, "' holds a NaN or Inf (element ", f.element,
       " of ", p.count, ") at step ", f.step,
       ", before its reduction (ddp_options::check_finite): this rank produced it, and no rank "
       "reduced it. Look at this rank's loss and inputs of that step (a learning rate too high, "
       "a log of zero, a division by zero). This group is unusable now; create a new group."},
      rank());
}

DDP_INLINE void step_driver_core::compare_parameters_across_ranks() {
  const auto& ps = registry_.parameters();
  const std::size_t n = ps.size(), w = static_cast<std::size_t>(world_);
  std::vector<std::int64_t> mine(n), all(n * w);
  for (std::size_t i = 0; i < n; ++i)
    if (!ps[i].on_device)
      mine[i] = static_cast<std::int64_t>(checksum(ps[i].value, ps[i].count * size_of(ps[i].type)));
  all_gather_i64(mine.data(), all.data(), n);
  for (std::size_t r = 1; r < w; ++r)
    for (std::size_t i = 0; i < n; ++i)
      if (all[r * n + i] != all[i])
        detail::throw_error(error_kind::mismatch,
                            {"rank ", rank(), ": DDP_DEBUG=DETAIL: parameter '", ps[i].name,
                             "' differs between rank 0 and rank ", r, " at step ", steps_ + 1, " of ",
                             to_string(step_call_),
                             ": the ranks' models drifted apart. A synchronize() forgotten or called on some "
                             "ranks only (an optimizer step on gradients not averaged), or an optimizer step "
                             "on some ranks only; look at rank ",
                             r, "'s code"},
                            static_cast<int>(r));
}

DDP_INLINE void step_driver_core::end_step(bool counted) {
  join_end_step();
  step_.reset();
  repeat_ = certain_repeat_ = storage_checked_ = false;
  if (counted) ++steps_;
}

DDP_INLINE void step_driver_core::check_storage_before_launch() {
  // A layout for moved storage that threw earlier in this step (its caller caught it) is done
  // now, before a bucket launches: the walk already recorded the new addresses, so nothing
  // below would see them move, and the old plan would read past the new storage.
  if (layout_pending_ && !step_.launched_any()) {
    refresh();
    return;
  }
  const auto moved = moved_parameters();
  if (moved.empty()) return;
  if (!step_.launched_any()) {
    refresh(); // nothing read the old storage yet: follow the new
    return;
  }
  const std::string why = detail::message(
      {"rank ", rank(), ": the gradient (or value) of parameter '", registry_[moved.front()].name,
       "' was replaced by new storage after this step's first bucket started (a vector reassigned or "
       "resized, a matrix resized): its bucket would read or write the old storage. Replace or resize "
       "gradients before backward or between steps, never while a step's buckets are under way"});
  // The other ranks are in this step's collectives already: they fail now, naming this rank.
  abort_group(why);
  detail::throw_error(error_kind::config, {why}, rank());
}

DDP_INLINE void step_driver_core::mark_the_rest_ready() {
  for (std::size_t i = 0; i < registry_.size(); ++i) {
    if (!step_.is_pending(i)) continue;
    if (opts_.strict_marking)
      detail::throw_error(error_kind::config,
                          {"rank ", rank(), ": gradient of parameter '", registry_[i].name,
                           "' was not marked ready before synchronize() (strict_marking is on: "
                           "call mark_grad_ready or mark_unused for it)"},
                          rank());
    last_reduced_.before_reduction(i, registry_[i]);
    step_.mark(i, mark_state::ready);
  }
}

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_DATA_PARALLEL_STEP_DRIVER_INL_HPP
