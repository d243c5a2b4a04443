// ddp::gradient_sink: how a model whose framework knows when each gradient is
// final (an autograd engine) tells distributed_data_parallel, without naming
// its type. See model_traits<M>::attach in ddp/model.hpp.
#ifndef DDP_DATA_PARALLEL_GRADIENT_SINK_HPP
#define DDP_DATA_PARALLEL_GRADIENT_SINK_HPP

#include <ddp/config.hpp>

#include <cstddef>
#include <type_traits>

DDP_BEGIN_NAMESPACE

class gradient_sink {
public:
  /// `owner`: anything with mark_grad_ready(std::size_t), mark_unused(std::size_t)
  /// and marked(std::size_t).
  template <class Owner>
  requires(!std::is_same_v<std::remove_cv_t<Owner>, gradient_sink>) explicit gradient_sink(
      Owner& owner) noexcept
      : owner_(&owner), ready_([](void* o, std::size_t i) { static_cast<Owner*>(o)->mark_grad_ready(i); }),
        unused_([](void* o, std::size_t i) { static_cast<Owner*>(o)->mark_unused(i); }),
        marked_([](void* o, std::size_t i) { return static_cast<Owner*>(o)->marked(i); }) {}

  /// Gradient `index` (registration order) is final for this step.
  void ready(std::size_t index) const { ready_(owner_, index); }
  /// This rank has no gradient for `index` this step: it counts as zeros.
  void unused(std::size_t index) const { unused_(owner_, index); }
  /// Whether `index` was already marked in this step (by hand or by the adapter).
  bool marked(std::size_t index) const { return marked_(owner_, index); }

private:
  void* owner_;
  void (*ready_)(void*, std::size_t);
  void (*unused_)(void*, std::size_t);
  bool (*marked_)(void*, std::size_t);
};

DDP_END_NAMESPACE

#endif // DDP_DATA_PARALLEL_GRADIENT_SINK_HPP
