// ddp::flat_model — the common C layout as a model: one contiguous block of
// parameters and one of gradients, each tensor a named (offset, count) range
// of both (llm.c's ParameterTensors, a hand-written trainer's float arrays).
// Its walk lists the tensors from the highest offset down: the bucketing
// policies fill buckets in reverse walk order, so each bucket is then one
// ascending, contiguous range of the gradient block and is reduced in place,
// whatever order the tensors were listed in (docs/api.md, "Flat models").
#ifndef DDP_FLAT_MODEL_HPP
#define DDP_FLAT_MODEL_HPP

#include <ddp/detail/common/message.hpp>
#include <ddp/error.hpp>
#include <ddp/tensor.hpp>

#include <algorithm>
#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

DDP_BEGIN_NAMESPACE

/// One tensor of a flat model: `count` elements from element `offset` of the
/// parameter block, and at the same offset of the gradient block.
struct flat_tensor {
  std::string name;
  std::size_t offset = 0;
  std::size_t count = 0;
};

/// A model over one parameter block and one gradient block of T (float,
/// double, a 16-bit type with ddp::dtype_of). It owns neither block: both must
/// outlive it and the distributed_data_parallel built on it, and the gradient
/// block must be allocated before that is built.
template <element T> class flat_model {
public:
  using value_type = T;

  /// `tensors` in any order; they must not overlap. Gaps between them are
  /// allowed (a bucket spanning one is packed instead of reduced in place).
  flat_model(T* params, T* grads, std::vector<flat_tensor> tensors)
      : params_(params), grads_(grads), tensors_(std::move(tensors)) {
    // Highest offset first; at one offset an empty tensor last, so that in
    // reverse (bucket) order every tensor starts where the one before ends.
    std::stable_sort(tensors_.begin(), tensors_.end(), [](const flat_tensor& a, const flat_tensor& b) {
      return a.offset != b.offset ? a.offset > b.offset : a.count > b.count;
    });
    for (std::size_t k = 0; k + 1 < tensors_.size(); ++k) {
      const auto& hi = tensors_[k];
      const auto& lo = tensors_[k + 1];
      if (lo.offset + lo.count > hi.offset)
        detail::throw_error(error_kind::config,
                            {"flat_model: tensor '", lo.name, "' (elements ", lo.offset, "..",
                             lo.offset + lo.count, ") overlaps '", hi.name, "' (from element ", hi.offset,
                             "): give each tensor its own range of the blocks"});
    }
  }

  /// f(name, value, grad) per tensor, highest offset first; value and grad are
  /// std::span<T> views of the two blocks.
  template <class F> void for_each_parameter(F&& f) {
    for (const auto& t : tensors_)
      f(std::string_view(t.name), std::span<T>(params_ + t.offset, t.count),
        std::span<T>(grads_ + t.offset, t.count));
  }

  /// The tensors in walk order: index i here is distributed_data_parallel's parameter i.
  const std::vector<flat_tensor>& tensors() const noexcept { return tensors_; }

  /// Tensor `name`'s parameter and gradient (e.g. for dp.mark_grad_ready(m.grad("wte"))).
  std::span<T> value(std::string_view name) const { return {params_ + find(name).offset, find(name).count}; }
  std::span<T> grad(std::string_view name) const { return {grads_ + find(name).offset, find(name).count}; }

  T* params() const noexcept { return params_; }
  T* grads() const noexcept { return grads_; }

private:
  const flat_tensor& find(std::string_view name) const {
    for (const auto& t : tensors_)
      if (t.name == name) return t;
    detail::throw_error(error_kind::config, {"flat_model: no tensor is named '", name, "'"});
  }

  T* params_;
  T* grads_;
  std::vector<flat_tensor> tensors_;
};

DDP_END_NAMESPACE

#endif // DDP_FLAT_MODEL_HPP
