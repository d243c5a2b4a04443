// The gradients of a LibTorch module as views into storage ddp owns (PyTorch's
// gradient_as_bucket_view): one flat tensor per dtype and device, parameters
// back to back in reverse registration order, the order backward produces
// them and buckets take them, so a bucket is one contiguous range that
// reduces in place. Each parameter's .grad is set to its view.
#ifndef DDP_DETAIL_TORCH_GRADIENT_VIEWS_HPP
#define DDP_DETAIL_TORCH_GRADIENT_VIEWS_HPP

#include <ddp/detail/torch/linkage.hpp>

#include <torch/types.h>

#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail::libtorch {

/// Views over fresh storage for `params` (each trainable, contiguous), with
/// any gradient a parameter already has copied in; the views are returned in
/// the order of `params`. A view is a plain tensor over the storage (not an
/// autograd view), so optimizers may detach_() and zero_() it like any gradient.
DDP_INLINE std::vector<::torch::Tensor> make_gradient_views(const std::vector<::torch::Tensor>& params);

} // namespace detail::libtorch
DDP_END_NAMESPACE

#if DDP_DETAIL_DEFINE_TORCH_RUNTIME
#include <ddp/detail/torch/gradient_views-inl.hpp>
#endif

#endif // DDP_DETAIL_TORCH_GRADIENT_VIEWS_HPP
