// The autograd function behind ddp::torch::SyncBatchNorm
// (ddp/torch/sync_batch_norm.hpp): its forward normalizes with every rank's
// batch statistics, its backward all-reduces the two per-channel gradient
// sums, as PyTorch's SyncBatchNorm does. The group is a template parameter:
// sync_batch_stats and sync_batch_norm_grad_sums are found beside it.
#ifndef DDP_DETAIL_TORCH_SYNC_BATCH_NORM_HPP
#define DDP_DETAIL_TORCH_SYNC_BATCH_NORM_HPP

#include <ddp/error.hpp>

#include <torch/csrc/autograd/custom_function.h>
#include <torch/types.h>

#include <cstdint>
#include <span>
#include <string>
#include <tuple>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail::libtorch {

/// Every dimension but the channels' (1).
inline std::vector<std::int64_t> reduce_dims(const ::torch::Tensor& x) {
  std::vector<std::int64_t> dims{0};
  for (std::int64_t d = 2; d < x.dim(); ++d)
    dims.push_back(d);
  return dims;
}

/// A per-channel vector shaped to broadcast against x: [1, C, 1, ...].
inline ::torch::Tensor per_channel(const ::torch::Tensor& v, const ::torch::Tensor& x) {
  std::vector<std::int64_t> shape(static_cast<std::size_t>(x.dim()), 1);
  shape[1] = v.numel();
  return v.reshape(shape);
}

inline ::torch::Tensor to_tensor(const std::vector<double>& v) {
  return ::torch::tensor(::c10::ArrayRef<double>(v), ::torch::kFloat64);
}

/// The autograd function of ddp::torch::SyncBatchNorm (Group: the process group): forward with the global
/// statistics (updating the running ones when `factor` > 0), backward with the global gradient sums.
template <class Group>
struct sync_batch_norm_function : ::torch::autograd::Function<sync_batch_norm_function<Group>> {
  static ::torch::Tensor forward(::torch::autograd::AutogradContext* ctx, ::torch::Tensor input,
                                 ::torch::Tensor weight, ::torch::Tensor bias, ::torch::Tensor running_mean,
                                 ::torch::Tensor running_var, double eps, double factor, std::int64_t group) {
    auto& pg = *reinterpret_cast<Group*>(group);
    const std::int64_t c = input.size(1);
    const std::int64_t count = c == 0 ? 0 : input.numel() / c;
    // Local moments in double: the combination is exact to double, so float's error stays the input's own.
    auto xd = input.to(::torch::kFloat64);
    ::torch::Tensor mean_l, var_l;
    if (count > 0) {
      std::tie(var_l, mean_l) = ::torch::var_mean(xd, reduce_dims(input), /*unbiased=*/false);
    } else {
      mean_l = ::torch::zeros({c}, ::torch::kFloat64);
      var_l = ::torch::zeros({c}, ::torch::kFloat64);
    }
    mean_l = mean_l.contiguous();
    var_l = var_l.contiguous();
    const auto s = sync_batch_stats(pg, std::span<const double>(mean_l.data_ptr<double>(), std::size_t(c)),
                                    std::span<const double>(var_l.data_ptr<double>(), std::size_t(c)), count);
    if (s.count <= 1)
      throw error(error_kind::config, "SyncBatchNorm on rank " + std::to_string(pg.rank()) + ": " +
                                          std::to_string(s.count) +
                                          " value per channel over all ranks' batches: training needs more "
                                          "than 1 (a larger batch, or eval() for this step)");
    auto mean = to_tensor(s.mean), var = to_tensor(s.var);
    auto invstd = (var + eps).rsqrt();
    if (factor > 0.0) {
      ::torch::NoGradGuard no_grad;
      auto unbiased = to_tensor(s.unbiased_var);
      running_mean.mul_(1.0 - factor).add_(mean.to(running_mean.scalar_type()), factor);
      running_var.mul_(1.0 - factor).add_(unbiased.to(running_var.scalar_type()), factor);
    }
    auto mean_x = per_channel(mean, input), invstd_x = per_channel(invstd, input);
    auto y = (xd - mean_x) * invstd_x;
    const bool affine = weight.numel() > 0; // empty: the module has no weight and bias
    if (affine) y = y * per_channel(weight.to(::torch::kFloat64), input);
    if (affine) y = y + per_channel(bias.to(::torch::kFloat64), input);
    ctx->save_for_backward({input, weight, mean, invstd});
    ctx->saved_data["count"] = s.count;
    ctx->saved_data["group"] = group;
    return y.to(input.scalar_type());
  }

  static ::torch::autograd::variable_list backward(::torch::autograd::AutogradContext* ctx,
                                                   ::torch::autograd::variable_list grad_outputs) {
    auto saved = ctx->get_saved_variables();
    auto input = saved[0], weight = saved[1], mean = saved[2], invstd = saved[3];
    auto& pg = *reinterpret_cast<Group*>(ctx->saved_data["group"].toInt());
    const double n = static_cast<double>(ctx->saved_data["count"].toInt());
    auto dy = grad_outputs[0].to(::torch::kFloat64);
    auto xmu = input.to(::torch::kFloat64) - per_channel(mean, input);
    const auto dims = reduce_dims(input);
    auto sum_dy = dy.sum(dims).contiguous();
    auto sum_dy_xmu = (dy * xmu).sum(dims).contiguous();
    // The parameters' gradients are this rank's share; DDP averages them as any gradient.
    ::torch::Tensor grad_weight, grad_bias;
    const bool affine = weight.numel() > 0;
    if (affine) {
      grad_weight = (sum_dy_xmu * invstd).to(weight.scalar_type());
      grad_bias = sum_dy.to(weight.scalar_type());
    }
    // Every rank all-reduces, whether or not its input needs a gradient: the ranks' collectives must match.
    auto g_dy = sum_dy.clone(), g_dy_xmu = sum_dy_xmu.clone();
    const auto c = static_cast<std::size_t>(g_dy.numel());
    sync_batch_norm_grad_sums(pg, std::span<double>(g_dy.data_ptr<double>(), c),
                              std::span<double>(g_dy_xmu.data_ptr<double>(), c));
    auto mean_dy = g_dy / n, mean_dy_xmu = g_dy_xmu / n;
    auto scale = affine ? invstd * weight.to(::torch::kFloat64) : invstd;
    auto dx = (dy - per_channel(mean_dy, input) - xmu * per_channel(invstd * invstd * mean_dy_xmu, input)) *
              per_channel(scale, input);
    return {dx.to(input.scalar_type()), grad_weight,       grad_bias,         ::torch::Tensor(),
            ::torch::Tensor(),          ::torch::Tensor(), ::torch::Tensor(), ::torch::Tensor()};
  }
};

} // namespace detail::libtorch
DDP_END_NAMESPACE

#endif // DDP_DETAIL_TORCH_SYNC_BATCH_NORM_HPP
