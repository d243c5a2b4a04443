// The one readable message per misuse that distributed_data_parallel and
// sharded_data_parallel give for a wrong model type or policy: their primary
// templates derive from this, so its static_asserts fire once, in order.
#ifndef DDP_DETAIL_DATA_PARALLEL_POLICY_DIAGNOSTICS_HPP
#define DDP_DETAIL_DATA_PARALLEL_POLICY_DIAGNOSTICS_HPP

#include <ddp/backend/communicator.hpp>
#include <ddp/bucketing.hpp>
#include <ddp/model.hpp>
#include <ddp/reduction.hpp>

DDP_BEGIN_NAMESPACE
namespace detail {

template <class Model, class Backend, class Bucketing, class Reduction> struct policy_diagnostics {
  static_assert(
      model<Model>,
      "ddp: the model type must provide `template <class F> void for_each_parameter(F&& f)` calling "
      "f(name, value, grad) for each parameter in registration order, or specialize "
      "ddp::model_traits<Model> with a static for_each_parameter(Model&, F&&).");
  static_assert(!model<Model> || backend_policy<Backend>,
                "ddp: Backend must be a backend policy such as ddp::gloo or ddp::nccl.");
  static_assert(!model<Model> || !backend_policy<Backend> || bucketing_policy<Bucketing>,
                "ddp: Bucketing must be a bucketing policy: a type with `static "
                "std::vector<std::vector<std::size_t>> assign(std::span<const ddp::parameter_desc>)` "
                "(see ddp::bucketing::size_capped, per_tensor, single_buffer).");
  static_assert(!model<Model> || !backend_policy<Backend> || !bucketing_policy<Bucketing> ||
                    reduction_policy<Reduction>,
                "ddp: Reduction must be a reduction policy: a type with `static constexpr bool average` and "
                "`static constexpr ddp::dtype wire(ddp::dtype)` (see ddp::reduction::mean, sum, "
                "fp16_compressed_mean, bf16_compressed_mean).");
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_DATA_PARALLEL_POLICY_DIAGNOSTICS_HPP
