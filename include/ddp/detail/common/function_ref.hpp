// A non-owning reference to a callable (C++26's std::function_ref, reduced to
// what ddp needs): code compiled once takes a caller's lambda through it
// without a template parameter, and without std::function's allocation.
#ifndef DDP_DETAIL_COMMON_FUNCTION_REF_HPP
#define DDP_DETAIL_COMMON_FUNCTION_REF_HPP

#include <ddp/config.hpp>

#include <memory>
#include <type_traits>
#include <utility>

DDP_BEGIN_NAMESPACE
namespace detail {

template <class Signature> class function_ref;

/// What a function_ref<R(Args...)> is made from: a callable object (a lambda),
/// not a function itself, nor another function_ref (that is a copy).
template <class F, class Ref, class R, class... Args>
concept referable_callable =
    !std::is_same_v<std::remove_cvref_t<F>, Ref> && !std::is_function_v<std::remove_reference_t<F>> &&
    std::is_invocable_r_v<R, F&, Args...>;

/// Valid while the callable it was made from lives: a parameter, never a member.
template <class R, class... Args> class function_ref<R(Args...)> {
public:
  /// Implicit, as a function pointer converts.
  template <referable_callable<function_ref, R, Args...> F>
  function_ref(F&& f) noexcept // NOLINT(google-explicit-constructor)
      : object_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))), call_(&call<F>) {}

  R operator()(Args... args) const { return call_(object_, std::forward<Args>(args)...); }

private:
  template <class F> static R call(void* o, Args... args) {
    auto& callable = *static_cast<std::remove_reference_t<F>*>(o);
    if constexpr (std::is_void_v<R>)
      callable(std::forward<Args>(args)...);
    else
      return callable(std::forward<Args>(args)...);
  }

  void* object_;
  R (*call_)(void*, Args...);
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_COMMON_FUNCTION_REF_HPP
