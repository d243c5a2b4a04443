// The model as distributed_data_parallel sees it: its parameters and buffers
// walked into type-erased slots, found by name or by gradient address, checked
// against the other ranks, and followed when their storage moves.
#ifndef DDP_DETAIL_DATA_PARALLEL_PARAMETER_REGISTRY_HPP
#define DDP_DETAIL_DATA_PARALLEL_PARAMETER_REGISTRY_HPP

#include <ddp/backend/communicator.hpp>
#include <ddp/detail/common/linkage.hpp>
#include <ddp/detail/data_parallel/gradient_storage.hpp>
#include <ddp/detail/data_parallel/model_layout.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

/// The walked slots and what needs only them: compiled once (runtime), where
/// parameter_registry<Model> adds the walks of the model.
class parameter_slots {
public:
  const std::vector<tensor_slot>& parameters() const noexcept { return params_; }
  const std::vector<tensor_slot>& buffers() const noexcept { return buffers_; }
  std::size_t size() const noexcept { return params_.size(); }
  const tensor_slot& operator[](std::size_t i) const { return params_[i]; }

  /// The index of the parameter called `name`.
  DDP_INLINE std::size_t index(std::string_view name) const;

  /// The index of the non-empty parameter whose gradient starts at `grad`, as
  /// of the last walk. Zero-sized gradients are not found by address: theirs
  /// may be null or another's.
  std::optional<std::size_t> find_gradient(const void* grad) const {
    auto it = by_grad_.find(grad);
    if (it == by_grad_.end()) return std::nullopt;
    return it->second;
  }

  /// Every rank must hold the same parameters and buffers (names, order,
  /// dtypes, sizes): the first difference from rank 0 is an error naming the
  /// rank and the parameter, on every rank. `settings` ("name=value" lines):
  /// options every rank must set alike, checked in the same exchange after
  /// the model (describe_settings).
  template <communicator C> void verify_across_ranks(C& comm, std::string_view settings = {}) const {
    const std::string desc = describe(params_, buffers_) + describe_settings(settings);
    const auto w = static_cast<std::size_t>(comm.size());
    std::int64_t len = static_cast<std::int64_t>(desc.size());
    std::vector<std::int64_t> lens(w);
    comm.all_gather(&len, lens.data(), 1, dtype::i64, true).wait();
    std::size_t longest = 0;
    for (auto l : lens)
      longest = std::max(longest, static_cast<std::size_t>(l));
    std::vector<std::uint8_t> mine(longest, 0), all(longest * w);
    std::memcpy(mine.data(), desc.data(), desc.size());
    comm.all_gather(mine.data(), all.data(), longest, dtype::u8, true).wait();
    std::vector<std::string> each(w);
    for (std::size_t r = 0; r < w; ++r)
      each[r].assign(reinterpret_cast<const char*>(all.data() + r * longest),
                     static_cast<std::size_t>(lens[r]));
    throw_first_difference(each);
  }

  /// Copies rank 0's parameters and buffers (or only its buffers) to every rank.
  /// Device tensors go through `device` (device_broadcasts: never a device
  /// pointer handed to host code), which also ends the round.
  template <communicator C, class Device>
  void broadcast_from_rank0(C& comm, bool buffers_only, Device& device) const {
    std::vector<work> ws;
    for (auto* list : {&params_, &buffers_}) {
      if (buffers_only && list == &params_) continue;
      for (auto& s : *list)
        ws.push_back(s.on_device ? device.broadcast(s) : comm.broadcast(s.value, s.count, s.type, 0, false));
    }
    device.complete(ws);
  }

  /// Whether the gradients are in device memory; all of them or none.
  DDP_INLINE bool gradients_on_device(int rank) const;

  /// Whether any parameter or buffer lives in device memory.
  DDP_INLINE bool any_on_device() const;

protected:
  /// `rank` names this rank in what it refuses: duplicate names, null or shared gradient storage.
  DDP_INLINE parameter_slots(std::vector<tensor_slot> params, std::vector<tensor_slot> buffers, int rank);

  /// A new walk of the same model: storage may move between steps; names,
  /// sizes and count may not.
  DDP_INLINE void replace(std::vector<tensor_slot> params, std::vector<tensor_slot> buffers, int rank);

  std::vector<tensor_slot> params_, buffers_;

private:
  DDP_INLINE void index_gradients();
  /// `each[r]`: rank r's description of its model; throws naming the first rank that differs from rank 0.
  DDP_INLINE static void throw_first_difference(const std::vector<std::string>& each);
  DDP_INLINE static void check_unchanged(const std::vector<tensor_slot>& now,
                                         const std::vector<tensor_slot>& before, const char* what, int rank);

  std::unordered_map<const void*, std::size_t> by_grad_;
};

template <class Model> class parameter_registry : public parameter_slots {
public:
  parameter_registry(Model& m, int rank) : parameter_registry(m, rank, collect_parameters(m)) {}

  /// Walks the model again when storage moved since the last walk (a resized
  /// Eigen matrix), refusing changed names, sizes or counts. Cheap when nothing
  /// moved (no allocation): it runs at the start of every step. True if it moved.
  bool refresh(int rank);

  /// The parameters whose value or gradient no longer lies where the last
  /// walk found it (the model is walked again; no allocation when none moved).
  std::vector<std::size_t> moved();

private:
  /// The parameters are walked before the buffers (the order a walk's errors and side effects see).
  parameter_registry(Model& m, int rank, std::vector<tensor_slot> params)
      : parameter_slots(std::move(params), collect_buffers(m), rank), model_(m) {}

  Model& model_;
};

// The walks are defined outside the class, so not inline: where a walked type's
// registry is instantiated once (an explicit instantiation declaration, as
// detail/torch/instances.hpp has for LibTorch modules), a file that uses it
// does not instantiate them again.
template <class Model> bool parameter_registry<Model>::refresh(int rank) {
  if (same_storage(model_, params_, buffers_)) return false;
  auto params = collect_parameters(model_); // parameters first, then buffers, as at construction
  replace(std::move(params), collect_buffers(model_), rank);
  return true;
}

template <class Model> std::vector<std::size_t> parameter_registry<Model>::moved() {
  std::vector<std::size_t> out;
  std::size_t i = 0;
  model_traits<Model>::for_each_parameter(model_, [&](auto&&, auto&& value, auto&& grad) {
    if constexpr (tensor<std::remove_cvref_t<decltype(value)>> &&
                  tensor<std::remove_cvref_t<decltype(grad)>>) {
      if (i < params_.size() && (static_cast<const void*>(as_span(value).data()) != params_[i].value ||
                                 static_cast<const void*>(as_span(grad).data()) != params_[i].grad))
        out.push_back(i);
      ++i;
    }
  });
  return out;
}

} // namespace detail
DDP_END_NAMESPACE

#if DDP_DETAIL_DEFINE_RUNTIME
#include <ddp/detail/data_parallel/parameter_registry-inl.hpp>
#endif

#endif // DDP_DETAIL_DATA_PARALLEL_PARAMETER_REGISTRY_HPP
