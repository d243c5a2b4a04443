// The parameters and buffers of a model, walked once into type-erased slots,
// plus the description that ranks compare to prove they hold the same model.
#ifndef DDP_DETAIL_DATA_PARALLEL_MODEL_LAYOUT_HPP
#define DDP_DETAIL_DATA_PARALLEL_MODEL_LAYOUT_HPP

#include <ddp/detail/common/linkage.hpp>
#include <ddp/detail/common/message.hpp>
#include <ddp/error.hpp>
#include <ddp/model.hpp>
#include <ddp/tensor.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

struct tensor_slot {
  std::string name;
  dtype type = dtype::f32;
  void* value = nullptr;
  void* grad = nullptr; ///< null for buffers
  std::size_t count = 0;
  bool on_device = false; ///< value (and grad) in device memory
};

/// Whether the walk can keep a value, gradient or buffer passed as `T` (the
/// forwarded type: `X&` for a named tensor, `X&&` for a temporary); otherwise
/// one static_assert says why and the caller compiles nothing else with it.
/// ddp keeps the elements' address and writes through it (rank 0's values,
/// the averaged gradients), so they must be writable and outlive the walk: a
/// named tensor, or a view (ddp::tensor_view) of storage that does.
template <class T> constexpr bool walkable_tensor() {
  using U = std::remove_cvref_t<T>;
  if constexpr (!tensor<U>) {
    static_assert(tensor<U>,
                  "ddp: for_each_parameter passed a value or gradient that is not a contiguous tensor: "
                  "use std::vector, std::span, an Eigen Matrix/Array/Map, or specialize ddp::tensor_traits");
    return false;
  } else if constexpr (std::is_const_v<tensor_value_t<U>>) {
    static_assert(
        !std::is_const_v<tensor_value_t<U>>,
        "ddp: for_each_parameter (or for_each_buffer) passed a tensor of const elements: ddp writes "
        "rank 0's values into parameters and buffers and the averaged gradients into gradients; "
        "pass them non-const");
    return false;
  } else if constexpr (!std::is_lvalue_reference_v<T> && !tensor_view<U>) {
    static_assert(std::is_lvalue_reference_v<T> || tensor_view<U>,
                  "ddp: for_each_parameter (or for_each_buffer) passed a temporary that owns its elements "
                  "(a std::vector, std::array or Eigen Matrix made in the call): ddp keeps their address, "
                  "which dies with it; pass the model's member, or a view of storage the model owns "
                  "(std::span, ddp::device_span, Eigen::Map; see ddp::enable_tensor_view)");
    return false;
  } else {
    return true;
  }
}

/// walkable_tensor of a parameter's value, then (only if it passed) of its gradient: one message.
template <class V, class G> constexpr bool walkable_parameter() {
  if constexpr (walkable_tensor<V>())
    return walkable_tensor<G>();
  else
    return false;
}

template <class M> std::vector<tensor_slot> collect_parameters(M& m) {
  std::vector<tensor_slot> out;
  model_traits<M>::for_each_parameter(m, [&](auto&& name, auto&& value, auto&& grad) {
    using V = std::remove_cvref_t<decltype(value)>;
    using G = std::remove_cvref_t<decltype(grad)>;
    if constexpr (walkable_parameter<decltype(value), decltype(grad)>()) {
      static_assert(std::is_same_v<tensor_value_t<V>, tensor_value_t<G>>,
                    "ddp: a parameter and its gradient must have the same element type");
      static_assert(on_device_v<V> == on_device_v<G>,
                    "ddp: a parameter and its gradient must live in the same memory space (host or device)");
      auto v = as_span(value);
      auto g = as_span(grad);
      std::string n(name);
      if (v.size() != g.size())
        detail::throw_error(error_kind::config, {"parameter '", n, "' has ", v.size(),
                                                 " elements but its gradient has ", g.size()});
      if (!is_floating(dtype_v<tensor_value_t<V>>))
        detail::throw_error(error_kind::config,
                            {"parameter '", n, "' is ", to_string(dtype_v<tensor_value_t<V>>),
                             ": gradients must be floating point"});
      out.push_back({std::move(n), dtype_v<tensor_value_t<V>>, v.data(), g.data(), v.size(), on_device_v<V>});
    }
  });
  return out;
}

template <class M> std::vector<tensor_slot> collect_buffers(M& m) {
  std::vector<tensor_slot> out;
  if constexpr (model_with_buffers<M>) {
    model_traits<M>::for_each_buffer(m, [&](auto&& name, auto&& value) {
      using V = std::remove_cvref_t<decltype(value)>;
      if constexpr (walkable_tensor<decltype(value)>()) {
        auto v = as_span(value);
        out.push_back(
            {std::string(name), dtype_v<tensor_value_t<V>>, v.data(), nullptr, v.size(), on_device_v<V>});
      }
    });
  }
  return out;
}

/// Whether the model still lists the same parameters and buffers (names, sizes)
/// at the same addresses as `params` and `buffers`. Walks the model without
/// allocating: it runs at the start of every step.
template <class M>
bool same_storage(M& m, const std::vector<tensor_slot>& params, const std::vector<tensor_slot>& buffers) {
  bool same = true;
  std::size_t i = 0;
  model_traits<M>::for_each_parameter(m, [&](auto&& name, auto&& value, auto&& grad) {
    if constexpr (walkable_parameter<decltype(value), decltype(grad)>()) {
      auto v = as_span(value);
      auto g = as_span(grad);
      same = same && i < params.size() && std::string_view(name) == params[i].name &&
             v.size() == params[i].count && static_cast<void*>(v.data()) == params[i].value &&
             static_cast<void*>(g.data()) == params[i].grad;
      ++i;
    }
  });
  same = same && i == params.size();
  if constexpr (model_with_buffers<M>) {
    std::size_t j = 0;
    model_traits<M>::for_each_buffer(m, [&](auto&& name, auto&& value) {
      if constexpr (walkable_tensor<decltype(value)>()) {
        auto v = as_span(value);
        same = same && j < buffers.size() && std::string_view(name) == buffers[j].name &&
               v.size() == buffers[j].count && static_cast<void*>(v.data()) == buffers[j].value;
        ++j;
      }
    });
    same = same && j == buffers.size();
  }
  return same;
}

DDP_INLINE void check_unique_names(const std::vector<tensor_slot>& slots, const char* what);

/// "name|dtype|count\n" per parameter, then per buffer: what ranks compare.
DDP_INLINE std::string describe(const std::vector<tensor_slot>& params,
                                const std::vector<tensor_slot>& buffers);

/// Options every rank must set alike ("name=value" lines) as a description's
/// last section; empty for none.
DDP_INLINE std::string describe_settings(std::string_view settings);

/// A description split back into its sections, one line per entry.
struct described_layout {
  std::vector<std::string> params, buffers, settings;
};

DDP_INLINE described_layout parse_description(const std::string& d);

/// "'fc1.weight' float32 x 100" from a description line.
DDP_INLINE std::string pretty_entry(const std::string& line);

/// The first difference between rank 0's description and rank r's, as a sentence; empty when equal.
/// Parameters and buffers are compared section by section, each counted from #0 on both sides, so
/// an extra parameter on rank r is named by its own index whatever rank 0 lists at that line.
DDP_INLINE std::string first_difference(const std::string& d0, const std::string& dr, int r);

/// The first setting (describe_settings) in which rank r's description differs from rank 0's,
/// as "ddp_options::NAME differs: rank r has it V and rank 0 U"; empty when equal.
DDP_INLINE std::string first_setting_difference(const std::string& d0, const std::string& dr, int r);

} // namespace detail
DDP_END_NAMESPACE

#if DDP_DETAIL_DEFINE_RUNTIME
#include <ddp/detail/data_parallel/model_layout-inl.hpp>
#endif

#endif // DDP_DETAIL_DATA_PARALLEL_MODEL_LAYOUT_HPP
