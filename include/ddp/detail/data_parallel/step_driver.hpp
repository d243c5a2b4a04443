// One step of a data-parallel class (distributed_data_parallel,
// sharded_data_parallel), from its first mark to the end of synchronize():
// marks by index or by gradient, no_sync(), strict_marking, the uneven-inputs
// flag and join()'s checks, and the checks that keep a step from being
// silently wrong. Each bucket's collective names its call site (step, bucket,
// and two findings every rank acts on together at its header: gradients that
// look like the last reduction's, and check_finite's NaN or Inf), gradient
// storage that moved is followed before a step's first bucket and refused
// after it. Both classes hold one, so that a step begins and ends in one place
// and a check on it holds for both. What differs between them, their
// collectives, stays in the owner, behind private hooks this class reaches as
// the owner's friend:
//   void storage_moved()                 the registry walked moved gradient storage again
//   void zero_gradient(std::size_t i)    gradient i is being marked unused: make it contribute zeros
//   void gradient_marked(std::size_t i, mark_state how)   recorded: launch the buckets now complete
//   void abort_group(const std::string& why)   this rank fails mid-step: fail the peers' collectives
// and a constant naming its synchronize() in messages and headers:
//   static constexpr call_kind step_call
// A member, not a base: its step state sizes itself from the bucket plan, which
// the owner builds after its registry.
#ifndef DDP_DETAIL_DATA_PARALLEL_STEP_DRIVER_HPP
#define DDP_DETAIL_DATA_PARALLEL_STEP_DRIVER_HPP

#include <ddp/backend/communicator.hpp>
#include <ddp/data_parallel/gradient_sink.hpp>
#include <ddp/data_parallel/options.hpp>
#include <ddp/detail/backend/call_site.hpp>
#include <ddp/detail/common/log.hpp>
#include <ddp/detail/data_parallel/attached_model.hpp>
#include <ddp/detail/data_parallel/bucket_plan.hpp>
#include <ddp/detail/data_parallel/gradient_fingerprint.hpp>
#include <ddp/detail/data_parallel/join.hpp>
#include <ddp/detail/data_parallel/parameter_registry.hpp>
#include <ddp/detail/data_parallel/step_state.hpp>
#include <ddp/detail/numeric/checksum.hpp>
#include <ddp/detail/numeric/finite.hpp>
#include <ddp/tensor.hpp>

#include <memory>
#include <optional>
#include <string>
#include <utility>

DDP_BEGIN_NAMESPACE
namespace detail {

template <class Owner, communicator Comm, class Model> class step_driver {
public:
  using registry_type = parameter_registry<typename attached_model<Model>::walked_type>;

  /// `group`: expires with the process group (process_group::lifetime()).
  step_driver(Owner& owner, Comm& comm, std::weak_ptr<const void> group, const ddp_options& opts,
              attached_model<Model>& attached, registry_type& registry, const bucket_plan& plan)
      : owner_(owner), comm_(comm), group_(std::move(group)), rank_(comm.rank()), opts_(opts),
        attached_(attached), registry_(registry), plan_(plan), step_(plan), join_(comm),
        last_reduced_(registry.size()), check_finite_(opts.check_finite) {
    std::vector<bool> empty(registry.size());
    for (std::size_t i = 0; i < registry.size(); ++i)
      empty[i] = registry[i].count == 0;
    step_.skip_empty(empty);
  }
  step_driver(const step_driver&) = delete;
  step_driver& operator=(const step_driver&) = delete;

  /// Throws when the process group is gone: every entry point that may touch
  /// the communicator calls it first.
  void check_group() const {
    if (group_.expired())
      throw error(error_kind::config,
                  "rank " + std::to_string(rank()) + ": " + to_string(Owner::step_call) +
                      " (or another call of that object) ran after its process_group was destroyed: "
                      "declare the process group before the data-parallel object, so that it outlives it",
                  rank());
  }

  bool started() const noexcept { return step_.started(); }
  /// How many of this step's buckets have been launched (0 outside a step).
  std::size_t launched() const noexcept { return step_.launched(); }
  /// Whether gradient `index` was marked (ready or unused) in the step under way.
  bool marked(std::size_t index) const {
    return step_.started() && index < registry_.size() && !step_.is_pending(index);
  }
  /// Inside no_sync(): marks are ignored and synchronize() communicates nothing.
  bool accumulating() const noexcept { return no_sync_depth_ > 0; }

  /// The counter a new no_sync_guard increments (and its end decrements);
  /// refused in the middle of a step.
  int& no_sync_depth() {
    check_group();
    if (step_.started())
      throw error(error_kind::config, "no_sync() entered in the middle of a step (gradients already marked): "
                                      "enter it before backward");
    return no_sync_depth_;
  }

  /// Gradient `index` is final for this step (ready, or unused on this rank).
  /// Ignored inside no_sync(), and for a zero-sized parameter (nothing to
  /// reduce); the first mark begins the step.
  void mark(std::size_t index, mark_state how) {
    check_group();
    ++marks_since_sync_;
    if (index >= registry_.size())
      throw error(error_kind::config,
                  "rank " + std::to_string(rank()) + ": parameter index " + std::to_string(index) +
                      " is out of range (" + std::to_string(registry_.size()) + " parameters)",
                  rank());
    if (accumulating()) return;
    begin_step();
    if (step_.is_empty(index)) return;
    if (!step_.is_pending(index))
      throw error(error_kind::config,
                  "rank " + std::to_string(rank()) + ": gradient of parameter '" + registry_[index].name +
                      "' was marked twice in one step",
                  rank());
    if (how == mark_state::unused) owner_.zero_gradient(index);
    last_reduced_.before_reduction(index, registry_[index]);
    step_.mark(index, how);
    owner_.gradient_marked(index, how);
  }

  /// mark() by the gradient tensor itself. A zero-sized one is not looked up:
  /// it has nothing to reduce, and its address may be null or another's.
  template <tensor G> void mark(const G& grad, mark_state how) {
    check_group();
    if (as_span(const_cast<G&>(grad)).size() == 0) {
      ++marks_since_sync_;
      if (!accumulating()) begin_step();
      return;
    }
    mark(index_of(grad), how);
  }

  /// The index of the non-empty parameter whose gradient is `grad`.
  template <tensor G> std::size_t index_of(const G& grad) {
    const void* p = as_span(const_cast<G&>(grad)).data();
    auto i = registry_.find_gradient(p);
    // The storage may have moved since the last walk; once a bucket of this step is in flight
    // it must not be re-laid out (its collective still uses the old buffers).
    if (!i && !step_.launched_any()) {
      refresh();
      i = registry_.find_gradient(p);
    }
    if (!i)
      throw error(error_kind::config,
                  "rank " + std::to_string(rank()) +
                      ": mark_grad_ready/mark_unused got a tensor that is not the gradient "
                      "of any parameter (pass the gradient tensor itself, or an index)" +
                      (step_.launched_any()
                           ? "; if its storage moved, move it before backward: buckets of this "
                             "step already launched with the old addresses"
                           : ""),
                  rank());
    return *i;
  }

  /// Calls launch(b) for every complete bucket below `limit`, in bucket order
  /// (step_state), each under its call site (the owner's call, this step,
  /// bucket b), once the gradients are where their marks found them.
  template <class F> void launch_ready(F&& launch, std::size_t limit) {
    if (!step_.can_launch(limit)) return;
    if (!step_.launched_any() && !storage_checked_) check_storage_before_launch();
    step_.launch_ready(
        [&](std::size_t b) {
          call_site site{Owner::step_call,
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

  /// Follows moved gradient storage: the registry walks the model again and,
  /// if anything moved, the owner lays out what depends on the addresses.
  void refresh() {
    if (registry_.refresh(rank())) owner_.storage_moved();
  }

  /// synchronize(): inside no_sync() it only ends the step (false). Otherwise
  /// it begins the step if no mark did, lets the model's adapter mark what it
  /// knows, counts the gradients still unmarked as ready (an error under
  /// strict_marking), runs `complete` (launch what is left, wait), and ends
  /// the step even when that throws, after `on_failure` (wait out what is in
  /// flight). True when the step communicated.
  /// The step counter (call_site) counts the synchronize() calls that did not
  /// throw, no_sync() ones included: a rank that skips a step's communication
  /// alone is then a step ahead of the others at its next bucket.
  template <class Complete, class OnFailure> bool synchronize(Complete&& complete, OnFailure&& on_failure) {
    check_group();
    if (accumulating()) {
      end_step(/*counted=*/true);
      return false;
    }
    const bool marked_before = step_.started();
    bool fully_marked = false;
    try {
      begin_step();
      attached_.before_synchronize(gradient_sink(owner_));
      // Begun by synchronize() itself (no mark did): maybe a second one with nothing new to
      // reduce. Only likely, from a few elements of each gradient (after the adapter zeroed
      // what backward left undefined): the ranks decide together, in the step's first
      // bucket header (collective_header::check_round).
      if (!marked_before && comm_.size() > 1) {
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
      if (debug() >= debug_level::detail && comm_.size() > 1 && !opts_.uneven_inputs)
        compare_parameters_across_ranks();
      complete();
    } catch (...) {
      on_failure();
      end_step(/*counted=*/false);
      if (non_finite_) throw_non_finite(); // this rank's own finding, in full
      throw;
    }
    if (comm_.size() > 1) last_reduced_.after_reduction(registry_.parameters());
    last_step_marked_ = fully_marked;
    marks_since_sync_ = 0;
    end_step(/*counted=*/true);
    return true;
  }

  /// join() for uneven inputs: refused without ddp_options::uneven_inputs or
  /// in the middle of a step; then prepare(), and shadow_step() for every
  /// step the ranks still training take (join_tracker).
  template <class Prepare, class Shadow> void join(Prepare&& prepare, Shadow&& shadow_step) {
    check_group();
    if (!opts_.uneven_inputs)
      throw error(error_kind::config, "join() needs ddp_options::uneven_inputs = true on every rank");
    if (step_.started()) throw error(error_kind::config, "join() called in the middle of a step");
    prepare();
    // A shadowed step is a step: the counter stays with the ranks still training.
    join_.shadow_until_all_joined([&] {
      shadow_step();
      ++steps_;
    });
  }

private:
  int rank() const { return rank_; }

  void begin_step() {
    if (step_.started()) return;
    step_.start();
    refresh();
    if (opts_.uneven_inputs) join_.begin_step();
  }

  /// ddp_options::check_finite: the first parameter of bucket b whose
  /// gradient on this rank holds a NaN or Inf, plus one (0: none), before it
  /// leaves the rank. It travels in the bucket's header, so that every rank
  /// stops there (collective_header::check_finite); this rank keeps the
  /// details for its own message. Host gradients only.
  std::uint32_t find_non_finite(std::size_t b) {
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

  static std::string name_of(const void* registry, std::uint32_t index) {
    const auto& r = *static_cast<const registry_type*>(registry);
    return index < r.size() ? r[index].name : "#" + std::to_string(index);
  }

  [[noreturn]] void throw_non_finite() {
    const auto f = *non_finite_;
    non_finite_.reset();
    const auto& p = registry_[f.param];
    throw error(error_kind::data,
                "rank " + std::to_string(rank()) + ": the gradient of parameter '" + p.name +
                    "' holds a NaN or Inf (element " + std::to_string(f.element) + " of " +
                    std::to_string(p.count) + ") at step " + std::to_string(f.step) +
                    ", before its reduction (ddp_options::check_finite): this rank produced it, and no rank "
                    "reduced it. Look at this rank's loss and inputs of that step (a learning rate too high, "
                    "a log of zero, a division by zero). This group is unusable now; create a new group.",
                rank());
  }

  /// DDP_DEBUG=DETAIL: every rank's parameters, as this step's forward used
  /// them, must be the same bits. Ranks whose models drifted apart (a
  /// synchronize() forgotten or run on some ranks only, so an optimizer step
  /// took unaveraged gradients) are named with the first parameter that
  /// differs. Host parameters only.
  void compare_parameters_across_ranks() {
    const auto& ps = registry_.parameters();
    const std::size_t n = ps.size(), w = static_cast<std::size_t>(comm_.size());
    std::vector<std::int64_t> mine(n), all(n * w);
    for (std::size_t i = 0; i < n; ++i)
      if (!ps[i].on_device)
        mine[i] = static_cast<std::int64_t>(checksum(ps[i].value, ps[i].count * size_of(ps[i].type)));
    comm_.all_gather(mine.data(), all.data(), n, dtype::i64, true).wait();
    for (std::size_t r = 1; r < w; ++r)
      for (std::size_t i = 0; i < n; ++i)
        if (all[r * n + i] != all[i])
          throw error(error_kind::mismatch,
                      "rank " + std::to_string(rank()) + ": DDP_DEBUG=DETAIL: parameter '" + ps[i].name +
                          "' differs between rank 0 and rank " + std::to_string(r) + " at step " +
                          std::to_string(steps_ + 1) + " of " + to_string(Owner::step_call) +
                          ": the ranks' models drifted apart. A synchronize() forgotten or called on some "
                          "ranks only (an optimizer step on gradients not averaged), or an optimizer step "
                          "on some ranks only; look at rank " +
                          std::to_string(r) + "'s code",
                      static_cast<int>(r));
  }

  void end_step(bool counted) {
    join_.end_step();
    step_.reset();
    repeat_ = certain_repeat_ = storage_checked_ = false;
    if (counted) ++steps_;
  }

  /// A bucket is about to read its gradients where the last walk found them:
  /// if one was replaced since (a vector reassigned, a matrix resized), that
  /// memory may be gone. Before any bucket of the step launched and before its
  /// own mark, the walk is simply followed; after either, it is an error.
  void check_storage_before_launch() {
    const auto moved = registry_.moved();
    if (moved.empty()) return;
    if (!step_.launched_any()) {
      refresh(); // nothing read the old storage yet: follow the new
      return;
    }
    const std::string why =
        "rank " + std::to_string(rank()) + ": the gradient (or value) of parameter '" +
        registry_[moved.front()].name +
        "' was replaced by new storage after this step's first bucket started (a vector reassigned or "
        "resized, a matrix resized): its bucket would read or write the old storage. Replace or resize "
        "gradients before backward or between steps, never while a step's buckets are under way";
    // The other ranks are in this step's collectives already: they fail now, naming this rank.
    owner_.abort_group(why);
    throw error(error_kind::config, why, rank());
  }

  void mark_the_rest_ready() {
    for (std::size_t i = 0; i < registry_.size(); ++i) {
      if (!step_.is_pending(i)) continue;
      if (opts_.strict_marking)
        throw error(error_kind::config,
                    "rank " + std::to_string(rank()) + ": gradient of parameter '" + registry_[i].name +
                        "' was not marked ready before synchronize() (strict_marking is on: "
                        "call mark_grad_ready or mark_unused for it)",
                    rank());
      last_reduced_.before_reduction(i, registry_[i]);
      step_.mark(i, mark_state::ready);
    }
  }

  Owner& owner_;
  Comm& comm_;
  std::weak_ptr<const void> group_;
  int rank_;
  const ddp_options& opts_;
  attached_model<Model>& attached_;
  registry_type& registry_;
  const bucket_plan& plan_;
  step_state step_;
  join_tracker<Comm> join_;
  int no_sync_depth_ = 0;
  std::uint32_t steps_ = 0;           ///< synchronize() calls that did not throw
  gradient_fingerprint last_reduced_; ///< what the last communicated synchronize() left
  bool check_finite_;
  /// this step's gradients look like the last reduction's (call_site::repeat)
  bool repeat_ = false;
  bool certain_repeat_ = false;  ///< and this rank marked every gradient last step, none since
  bool storage_checked_ = false; ///< synchronize() looked for moved storage this step
  /// mark calls (no_sync() ones too) since the last communicated synchronize()
  std::size_t marks_since_sync_ = 0;
  bool last_step_marked_ = false; ///< every gradient of that synchronize()'s step was marked before it
  struct non_finite {
    std::size_t param, element;
    std::uint32_t step;
  };
  std::optional<non_finite> non_finite_; ///< what find_non_finite found this step
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_DATA_PARALLEL_STEP_DRIVER_HPP
