// Separately compiled, what distributed_data_parallel instantiates for any
// LibTorch module without depending on the module's type (the registry's walks
// of the attached module: every module is walked through the one adapter type)
// is compiled once, in the torch runtime (detail/torch/linkage.hpp): a user's
// file then generates only the data-parallel class of its own module.
#ifndef DDP_DETAIL_TORCH_INSTANCES_HPP
#define DDP_DETAIL_TORCH_INSTANCES_HPP

#include <ddp/detail/torch/linkage.hpp>

// Header-only, nothing here: every file has every definition.
#if defined(DDP_SEPARATE_COMPILATION)
#include <ddp/detail/data_parallel/model_layout.hpp>
#include <ddp/detail/data_parallel/parameter_registry.hpp>
#include <ddp/detail/torch/attached_module.hpp>

#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

#if defined(DDP_TORCH_IMPLEMENTATION)
#define DDP_DETAIL_TORCH_INSTANCE template
#else
#define DDP_DETAIL_TORCH_INSTANCE extern template
#endif
DDP_DETAIL_TORCH_INSTANCE std::vector<tensor_slot>
collect_parameters<libtorch::attached_module>(libtorch::attached_module&);
DDP_DETAIL_TORCH_INSTANCE std::vector<tensor_slot>
collect_buffers<libtorch::attached_module>(libtorch::attached_module&);
DDP_DETAIL_TORCH_INSTANCE bool same_storage<libtorch::attached_module>(libtorch::attached_module&,
                                                                       const std::vector<tensor_slot>&,
                                                                       const std::vector<tensor_slot>&);
DDP_DETAIL_TORCH_INSTANCE class parameter_registry<libtorch::attached_module>;
#undef DDP_DETAIL_TORCH_INSTANCE

} // namespace detail
DDP_END_NAMESPACE
#endif

#endif // DDP_DETAIL_TORCH_INSTANCES_HPP
