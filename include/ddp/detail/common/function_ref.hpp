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

/// Valid while the callable it was made from lives: a parameter, never a member.
template <class R, class... Args> class function_ref<R(Args...)> {
public:
  template <class F>
  requires(!std::is_same_v<std::remove_cvref_t<F>, function_ref> && std::is_invocable_r_v<R, F&, Args...>)
      function_ref(F&& f)
  noexcept // NOLINT(google-explicit-constructor): converts like a function pointer
      : object_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))),
        call_([](void* o, Args... args) -> R {
          return (*static_cast<std::remove_reference_t<F>*>(o))(std::forward<Args>(args)...);
        }) {}

  R operator()(Args... args) const { return call_(object_, std::forward<Args>(args)...); }

private:
  void* object_;
  R (*call_)(void*, Args...);
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_COMMON_FUNCTION_REF_HPP
