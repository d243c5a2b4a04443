// The model as distributed_data_parallel sees it: its parameters and buffers
// walked into type-erased slots, found by name or by gradient address, checked
// against the other ranks, and followed when their storage moves.
#ifndef DDP_DETAIL_DATA_PARALLEL_PARAMETER_REGISTRY_HPP
#define DDP_DETAIL_DATA_PARALLEL_PARAMETER_REGISTRY_HPP

#include <ddp/backend/communicator.hpp>
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

template <class Model> class parameter_registry {
public:
  /// `rank` names this rank in what it refuses: duplicate names, null or shared gradient storage.
  parameter_registry(Model& m, int rank)
      : model_(m), params_(collect_parameters(m)), buffers_(collect_buffers(m)) {
    check_unique_names(params_, "parameters");
    check_unique_names(buffers_, "buffers");
    check_gradient_storage(params_, rank);
    index_gradients();
  }

  const std::vector<tensor_slot>& parameters() const noexcept { return params_; }
  const std::vector<tensor_slot>& buffers() const noexcept { return buffers_; }
  std::size_t size() const noexcept { return params_.size(); }
  const tensor_slot& operator[](std::size_t i) const { return params_[i]; }

  /// The index of the parameter called `name`.
  std::size_t index(std::string_view name) const {
    for (std::size_t i = 0; i < params_.size(); ++i)
      if (params_[i].name == name) return i;
    throw error(error_kind::config, "no parameter named '" + std::string(name) + "'");
  }

  /// The index of the non-empty parameter whose gradient starts at `grad`, as
  /// of the last walk. Zero-sized gradients are not found by address: theirs
  /// may be null or another's.
  std::optional<std::size_t> find_gradient(const void* grad) const {
    auto it = by_grad_.find(grad);
    if (it == by_grad_.end()) return std::nullopt;
    return it->second;
  }

  /// Walks the model again when storage moved since the last walk (a resized
  /// Eigen matrix), refusing changed names, sizes or counts. Cheap when nothing
  /// moved (no allocation): it runs at the start of every step. True if it moved.
  bool refresh(int rank) {
    if (same_storage(model_, params_, buffers_)) return false;
    auto params = collect_parameters(model_);
    auto buffers = collect_buffers(model_);
    check_unchanged(params, params_, "parameter", rank);
    check_unchanged(buffers, buffers_, "buffer", rank);
    check_gradient_storage(params, rank);
    params_ = std::move(params);
    buffers_ = std::move(buffers);
    index_gradients();
    return true;
  }

  /// The parameters whose value or gradient no longer lies where the last
  /// walk found it (the model is walked again; no allocation when none moved).
  std::vector<std::size_t> moved() {
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

  /// Every rank must hold the same parameters and buffers (names, order,
  /// dtypes, sizes): the first difference from rank 0 is an error naming the
  /// rank and the parameter, on every rank.
  template <communicator C> void verify_across_ranks(C& comm) const {
    const std::string desc = describe(params_, buffers_);
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
    auto of = [&](std::size_t r) {
      return std::string(reinterpret_cast<const char*>(all.data() + r * longest),
                         static_cast<std::size_t>(lens[r]));
    };
    const std::string d0 = of(0);
    for (std::size_t r = 1; r < w; ++r) {
      auto diff = first_difference(d0, of(r), static_cast<int>(r));
      if (!diff.empty())
        throw error(error_kind::mismatch,
                    "the model differs between ranks: " + diff +
                        ". Every rank must build the same model (same parameters, in the "
                        "same order, with the same dtypes and sizes).",
                    static_cast<int>(r));
    }
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
  bool gradients_on_device(int rank) const {
    for (auto& p : params_)
      if (p.on_device != params_.front().on_device)
        throw error(error_kind::config,
                    "rank " + std::to_string(rank) + ": parameter '" + p.name + "' lives in " +
                        (p.on_device ? "device" : "host") + " memory but parameter '" + params_.front().name +
                        "' does not: distributed_data_parallel needs every gradient in one memory space",
                    rank);
    return !params_.empty() && params_.front().on_device;
  }

  /// Whether any parameter or buffer lives in device memory.
  bool any_on_device() const {
    for (auto* list : {&params_, &buffers_})
      for (auto& s : *list)
        if (s.on_device) return true;
    return false;
  }

private:
  void index_gradients() {
    by_grad_.clear();
    for (std::size_t i = 0; i < params_.size(); ++i)
      if (params_[i].count > 0) by_grad_[params_[i].grad] = i;
  }

  /// Storage may move between steps; names, sizes and count may not.
  static void check_unchanged(const std::vector<tensor_slot>& now, const std::vector<tensor_slot>& before,
                              const char* what, int rank) {
    for (std::size_t i = 0; i < before.size(); ++i)
      if (i >= now.size() || now[i].count != before[i].count || now[i].name != before[i].name)
        throw error(error_kind::config,
                    "rank " + std::to_string(rank) + ": " + what + " '" + before[i].name +
                        "' changed its name or size after distributed_data_parallel was built");
    if (now.size() != before.size())
      throw error(error_kind::config, std::string("the model's ") + what +
                                          " count changed after distributed_data_parallel was built");
  }

  Model& model_;
  std::vector<tensor_slot> params_, buffers_;
  std::unordered_map<const void*, std::size_t> by_grad_;
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_DATA_PARALLEL_PARAMETER_REGISTRY_HPP
