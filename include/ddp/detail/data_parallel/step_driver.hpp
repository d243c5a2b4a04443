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
// the owner's friend (the step logic itself, step_driver_core, is compiled
// once: it reaches the owner and the model through virtual calls of the thin
// template step_driver):
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
#include <ddp/detail/common/function_ref.hpp>
#include <ddp/detail/common/linkage.hpp>
#include <ddp/detail/data_parallel/attached_model.hpp>
#include <ddp/detail/data_parallel/bucket_plan.hpp>
#include <ddp/detail/data_parallel/gradient_fingerprint.hpp>
#include <ddp/detail/data_parallel/join.hpp>
#include <ddp/detail/data_parallel/parameter_registry.hpp>
#include <ddp/detail/data_parallel/step_state.hpp>
#include <ddp/tensor.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

/// The step logic, model- and backend-free: what it needs of the owner, the
/// model's walk and the communicator are the pure virtual hooks at the end,
/// which step_driver implements.
class step_driver_core {
public:
  step_driver_core(const step_driver_core&) = delete;
  step_driver_core& operator=(const step_driver_core&) = delete;

  /// Throws when the process group is gone: every entry point that may touch
  /// the communicator calls it first.
  DDP_INLINE void check_group() const;

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
  DDP_INLINE int& no_sync_depth();

  /// Gradient `index` is final for this step (ready, or unused on this rank).
  /// Ignored inside no_sync(), and for a zero-sized parameter (nothing to
  /// reduce); the first mark begins the step.
  DDP_INLINE void mark(std::size_t index, mark_state how);

  /// mark() by the gradient tensor itself. A zero-sized one is not looked up:
  /// it has nothing to reduce, and its address may be null or another's.
  template <tensor G> void mark(const G& grad, mark_state how) {
    const auto s = as_span(const_cast<G&>(grad));
    mark_storage(s.data(), s.size(), how);
  }

  /// The index of the non-empty parameter whose gradient is `grad`.
  template <tensor G> std::size_t index_of(const G& grad) {
    return index_of_storage(as_span(const_cast<G&>(grad)).data());
  }

  /// Calls launch(b) for every complete bucket below `limit`, in bucket order
  /// (step_state), each under its call site (the owner's call, this step,
  /// bucket b), once the gradients are where their marks found them.
  void launch_ready(function_ref<void(std::size_t)> launch, std::size_t limit) {
    if (step_.can_launch(limit)) launch_complete_buckets(launch, limit);
  }

  /// synchronize() calls that did not throw, no_sync() ones included.
  std::uint32_t steps() const noexcept { return steps_; }

  /// While on, each step that communicates records the order of its
  /// mark_grad_ready calls (from its beginning): the bucket rebuild reads it.
  void record_ready_order(bool on) {
    record_ready_order_ = on;
    if (!on) ready_order_ = {};
  }
  /// The parameters marked ready in the step under way or the last one, in mark order.
  const std::vector<std::size_t>& ready_order() const noexcept { return ready_order_; }

  /// Before the owner replaces its bucket plan by `next` (between steps): room
  /// for it, so that plan_changed() cannot fail. Refused in the middle of a step.
  DDP_INLINE void prepare_plan(const bucket_plan& next);
  /// The owner laid its bucket plan out again, after prepare_plan().
  void plan_changed() noexcept { step_.plan_changed(); }

  /// Follows moved gradient storage: the registry walks the model again and,
  /// if anything moved, the owner lays out what depends on the addresses.
  DDP_INLINE void refresh();

  /// synchronize(): inside no_sync() it only ends the step (false). Otherwise
  /// it begins the step if no mark did, lets the model's adapter mark what it
  /// knows, counts the gradients still unmarked as ready (an error under
  /// strict_marking), runs `complete` (launch what is left, wait), and ends
  /// the step even when that throws, after `on_failure` (wait out what is in
  /// flight). True when the step communicated.
  /// The step counter (call_site) counts the synchronize() calls that did not
  /// throw, no_sync() ones included: a rank that skips a step's communication
  /// alone is then a step ahead of the others at its next bucket.
  DDP_INLINE bool synchronize(function_ref<void()> complete, function_ref<void()> on_failure);

  /// join() for uneven inputs: refused without ddp_options::uneven_inputs or
  /// in the middle of a step; then prepare(), and shadow_step() for every
  /// step the ranks still training take (join_tracker).
  DDP_INLINE void join(function_ref<void()> prepare, function_ref<void()> shadow_step);

protected:
  /// `group`: expires with the process group (process_group::lifetime()).
  DDP_INLINE step_driver_core(call_kind step_call, int rank, int world, std::weak_ptr<const void> group,
                              const ddp_options& opts, const parameter_slots& registry,
                              const bucket_plan& plan);
  ~step_driver_core() = default;

  // What step_driver supplies: the owner's hooks (see the file's head comment),
  // the model's walk, the communicator's part of a step.
  virtual void storage_moved() = 0;
  virtual void zero_gradient(std::size_t index) = 0;
  virtual void gradient_marked(std::size_t index, mark_state how) = 0;
  virtual void abort_group(const std::string& why) noexcept = 0;
  /// The registry walks the model again; true when storage moved.
  virtual bool walk_again() = 0;
  /// The parameters whose storage moved since the last walk.
  virtual std::vector<std::size_t> moved_parameters() = 0;
  /// The model's adapter marks what it knows (attached_model::before_synchronize).
  virtual void adapter_before_synchronize() = 0;
  /// join_tracker's three calls on the owner's communicator.
  virtual void join_begin_step() = 0;
  virtual void join_end_step() = 0;
  virtual void join_shadow_until_all_joined(function_ref<void()> shadow_step) = 0;
  /// A blocking all_gather of n int64 per rank.
  virtual void all_gather_i64(const std::int64_t* mine, std::int64_t* all, std::size_t n) = 0;

private:
  int rank() const { return rank_; }
  DDP_INLINE void mark_storage(const void* grad, std::size_t elements, mark_state how);
  DDP_INLINE std::size_t index_of_storage(const void* grad);
  DDP_INLINE void launch_complete_buckets(function_ref<void(std::size_t)> launch, std::size_t limit);
  DDP_INLINE void begin_step();

  /// ddp_options::check_finite: the first parameter of bucket b whose
  /// gradient on this rank holds a NaN or Inf, plus one (0: none), before it
  /// leaves the rank. It travels in the bucket's header, so that every rank
  /// stops there (collective_header::check_finite); this rank keeps the
  /// details for its own message. Host gradients only.
  DDP_INLINE std::uint32_t find_non_finite(std::size_t b);
  DDP_INLINE static std::string name_of(const void* registry, std::uint32_t index);
  [[noreturn]] DDP_INLINE void throw_non_finite();

  /// DDP_DEBUG=DETAIL: every rank's parameters, as this step's forward used
  /// them, must be the same bits. Ranks whose models drifted apart (a
  /// synchronize() forgotten or run on some ranks only, so an optimizer step
  /// took unaveraged gradients) are named with the first parameter that
  /// differs. Host parameters only.
  DDP_INLINE void compare_parameters_across_ranks();
  DDP_INLINE void end_step(bool counted);

  /// A bucket is about to read its gradients where the last walk found them:
  /// if one was replaced since (a vector reassigned, a matrix resized), that
  /// memory may be gone. Before any bucket of the step launched and before its
  /// own mark, the walk is simply followed; after either, it is an error.
  DDP_INLINE void check_storage_before_launch();
  DDP_INLINE void mark_the_rest_ready();

  call_kind step_call_;
  std::weak_ptr<const void> group_;
  int rank_;
  int world_;
  const ddp_options& opts_;
  const parameter_slots& registry_;
  const bucket_plan& plan_;
  step_state step_;
  int no_sync_depth_ = 0;
  std::uint32_t steps_ = 0;           ///< synchronize() calls that did not throw
  gradient_fingerprint last_reduced_; ///< what the last communicated synchronize() left
  bool check_finite_;
  /// this step's gradients look like the last reduction's (call_site::repeat)
  bool repeat_ = false;
  bool certain_repeat_ = false;  ///< and this rank marked every gradient last step, none since
  bool storage_checked_ = false; ///< synchronize() looked for moved storage this step
  /// Storage moved and the owner has not laid its buckets out for it yet (its storage_moved()
  /// threw): the next refresh() lays out again, though the walk finds nothing new.
  bool layout_pending_ = false;
  /// mark calls (no_sync() ones too) since the last communicated synchronize()
  std::size_t marks_since_sync_ = 0;
  bool last_step_marked_ = false; ///< every gradient of that synchronize()'s step was marked before it
  struct non_finite {
    std::size_t param, element;
    std::uint32_t step;
  };
  std::optional<non_finite> non_finite_; ///< what find_non_finite found this step
  bool record_ready_order_ = false;
  std::vector<std::size_t> ready_order_; ///< record_ready_order(): this step's marks of ready gradients
};

/// The owner's and the model's side of step_driver_core, for one owner type.
template <class Owner, communicator Comm, class Model> class step_driver final : public step_driver_core {
public:
  using registry_type = parameter_registry<typename attached_model<Model>::walked_type>;

  /// `group`: expires with the process group (process_group::lifetime()).
  step_driver(Owner& owner, Comm& comm, std::weak_ptr<const void> group, const ddp_options& opts,
              attached_model<Model>& attached, registry_type& registry, const bucket_plan& plan)
      : step_driver_core(Owner::step_call, comm.rank(), comm.size(), std::move(group), opts, registry, plan),
        owner_(owner), comm_(comm), attached_(attached), walked_(registry), join_(comm) {}

private:
  void storage_moved() override { owner_.storage_moved(); }
  void zero_gradient(std::size_t index) override { owner_.zero_gradient(index); }
  void gradient_marked(std::size_t index, mark_state how) override { owner_.gradient_marked(index, how); }
  void abort_group(const std::string& why) noexcept override { owner_.abort_group(why); }
  bool walk_again() override { return walked_.refresh(comm_.rank()); }
  std::vector<std::size_t> moved_parameters() override { return walked_.moved(); }
  void adapter_before_synchronize() override { attached_.before_synchronize(gradient_sink(owner_)); }
  void join_begin_step() override { join_.begin_step(); }
  void join_end_step() override { join_.end_step(); }
  void join_shadow_until_all_joined(function_ref<void()> shadow_step) override {
    join_.shadow_until_all_joined(shadow_step);
  }
  void all_gather_i64(const std::int64_t* mine, std::int64_t* all, std::size_t n) override {
    comm_.all_gather(mine, all, n, dtype::i64, true).wait();
  }

  Owner& owner_;
  Comm& comm_;
  attached_model<Model>& attached_;
  registry_type& walked_; ///< the base's registry_, with the walks of the model
  join_tracker<Comm> join_;
};

} // namespace detail
DDP_END_NAMESPACE

#if DDP_DETAIL_DEFINE_RUNTIME
#include <ddp/detail/data_parallel/step_driver-inl.hpp>
#endif

#endif // DDP_DETAIL_DATA_PARALLEL_STEP_DRIVER_HPP
