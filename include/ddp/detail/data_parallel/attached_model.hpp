// What distributed_data_parallel walks: the model itself, or the adapter its
// traits attach (model_traits<M>::attach, ddp/model.hpp), which also reports
// gradients as they become final.
#ifndef DDP_DETAIL_DATA_PARALLEL_ATTACHED_MODEL_HPP
#define DDP_DETAIL_DATA_PARALLEL_ATTACHED_MODEL_HPP

#include <ddp/data_parallel/gradient_sink.hpp>
#include <ddp/model.hpp>

#include <type_traits>

DDP_BEGIN_NAMESPACE
namespace detail {

template <class Model> class attached_model {
public:
  using walked_type = Model;
  explicit attached_model(Model& m) noexcept : model_(m) {}
  Model& walked() noexcept { return model_; }
  void connect(gradient_sink) noexcept {}
  void before_synchronize(gradient_sink) {}

private:
  Model& model_;
};

template <attachable_model Model> class attached_model<Model> {
public:
  using walked_type = std::remove_cvref_t<decltype(model_traits<Model>::attach(std::declval<Model&>()))>;
  static_assert(model<walked_type>, "ddp: model_traits<M>::attach must return a model (for_each_parameter)");
  static_assert(
      requires(walked_type & a, gradient_sink s) {
        a.connect(s);
        a.before_synchronize(s);
      },
      "ddp: the adapter model_traits<M>::attach returns needs connect(ddp::gradient_sink) and "
      "before_synchronize(ddp::gradient_sink)");

  explicit attached_model(Model& m) : adapter_(model_traits<Model>::attach(m)) {}
  walked_type& walked() noexcept { return adapter_; }
  void connect(gradient_sink s) { adapter_.connect(s); }
  void before_synchronize(gradient_sink s) { adapter_.before_synchronize(s); }

private:
  walked_type adapter_;
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_DATA_PARALLEL_ATTACHED_MODEL_HPP
