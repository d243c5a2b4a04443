// One step of a data-parallel class (distributed_data_parallel,
// sharded_data_parallel), from its first mark to the end of synchronize():
// marks by index or by gradient, no_sync(), strict_marking, the uneven-inputs
// flag and join()'s checks. Both classes hold one, so that a step begins and
// ends in one place and a check on it holds for both. What differs between
// them, their collectives, stays in the owner, behind three private hooks
// this class reaches as the owner's friend:
//   void storage_moved()                 the registry walked moved gradient storage again
//   void zero_gradient(std::size_t i)    gradient i is being marked unused: make it contribute zeros
//   void gradient_marked(std::size_t i, mark_state how)   recorded: launch the buckets now complete
// A member, not a base: its step state sizes itself from the bucket plan, which
// the owner builds after its registry.
#ifndef DDP_DETAIL_DATA_PARALLEL_STEP_DRIVER_HPP
#define DDP_DETAIL_DATA_PARALLEL_STEP_DRIVER_HPP

#include <ddp/backend/communicator.hpp>
#include <ddp/data_parallel/gradient_sink.hpp>
#include <ddp/data_parallel/options.hpp>
#include <ddp/detail/data_parallel/attached_model.hpp>
#include <ddp/detail/data_parallel/bucket_plan.hpp>
#include <ddp/detail/data_parallel/join.hpp>
#include <ddp/detail/data_parallel/parameter_registry.hpp>
#include <ddp/detail/data_parallel/step_state.hpp>
#include <ddp/tensor.hpp>

#include <string>
#include <utility>

DDP_BEGIN_NAMESPACE
namespace detail {

template <class Owner, communicator Comm, class Model> class step_driver {
public:
  using registry_type = parameter_registry<typename attached_model<Model>::walked_type>;

  step_driver(Owner& owner, Comm& comm, const ddp_options& opts, attached_model<Model>& attached,
              registry_type& registry, const bucket_plan& plan)
      : owner_(owner), comm_(comm), opts_(opts), attached_(attached), registry_(registry), step_(plan),
        join_(comm) {}
  step_driver(const step_driver&) = delete;
  step_driver& operator=(const step_driver&) = delete;

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
    if (step_.started())
      throw error(error_kind::config, "no_sync() entered in the middle of a step (gradients already marked): "
                                      "enter it before backward");
    return no_sync_depth_;
  }

  /// Gradient `index` is final for this step (ready, or unused on this rank).
  /// Ignored inside no_sync(); the first mark begins the step.
  void mark(std::size_t index, mark_state how) {
    if (index >= registry_.size())
      throw error(error_kind::config, "rank " + std::to_string(rank()) + ": parameter index " +
                                          std::to_string(index) + " is out of range (" +
                                          std::to_string(registry_.size()) + " parameters)");
    if (accumulating()) return;
    begin_step();
    if (!step_.is_pending(index))
      throw error(error_kind::config,
                  "rank " + std::to_string(rank()) + ": gradient of parameter '" + registry_[index].name +
                      "' was marked twice in one step",
                  rank());
    if (how == mark_state::unused) owner_.zero_gradient(index);
    step_.mark(index, how);
    owner_.gradient_marked(index, how);
  }

  /// The index of the parameter whose gradient is `grad`.
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

  /// Calls launch(b) for every complete bucket below `limit`, in bucket order (step_state).
  template <class F> void launch_ready(F&& launch, std::size_t limit) {
    step_.launch_ready(std::forward<F>(launch), limit);
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
  template <class Complete, class OnFailure> bool synchronize(Complete&& complete, OnFailure&& on_failure) {
    if (accumulating()) {
      end_step();
      return false;
    }
    begin_step();
    try {
      attached_.before_synchronize(gradient_sink(owner_));
      mark_the_rest_ready();
      complete();
    } catch (...) {
      on_failure();
      end_step();
      throw;
    }
    end_step();
    return true;
  }

  /// join() for uneven inputs: refused without ddp_options::uneven_inputs or
  /// in the middle of a step; then prepare(), and shadow_step() for every
  /// step the ranks still training take (join_tracker).
  template <class Prepare, class Shadow> void join(Prepare&& prepare, Shadow&& shadow_step) {
    if (!opts_.uneven_inputs)
      throw error(error_kind::config, "join() needs ddp_options::uneven_inputs = true on every rank");
    if (step_.started()) throw error(error_kind::config, "join() called in the middle of a step");
    prepare();
    join_.shadow_until_all_joined(std::forward<Shadow>(shadow_step));
  }

private:
  int rank() const { return comm_.rank(); }

  void begin_step() {
    if (step_.started()) return;
    step_.start();
    refresh();
    if (opts_.uneven_inputs) join_.begin_step();
  }

  void end_step() {
    join_.end_step();
    step_.reset();
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
      step_.mark(i, mark_state::ready);
    }
  }

  Owner& owner_;
  Comm& comm_;
  const ddp_options& opts_;
  attached_model<Model>& attached_;
  registry_type& registry_;
  step_state step_;
  join_tracker<Comm> join_;
  int no_sync_depth_ = 0;
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_DATA_PARALLEL_STEP_DRIVER_HPP
