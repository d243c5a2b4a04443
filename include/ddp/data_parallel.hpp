// ddp::distributed_data_parallel — gradient averaging for any model type, in
// buckets that launch while backward is still running.
#ifndef DDP_DATA_PARALLEL_HPP
#define DDP_DATA_PARALLEL_HPP

#include <ddp/bucketing.hpp>
#include <ddp/detail/elementwise.hpp>
#include <ddp/detail/fragment.hpp>
#include <ddp/detail/log.hpp>
#include <ddp/detail/model_layout.hpp>
#include <ddp/model.hpp>
#include <ddp/process_group.hpp>
#include <ddp/reduction.hpp>

#include <chrono>
#include <cstring>
#include <optional>
#include <unordered_map>

DDP_BEGIN_NAMESPACE

struct ddp_options {
  bool broadcast_buffers = true; ///< broadcast rank 0's buffers at the end of every synchronize()
  bool strict_marking = false;   ///< a gradient still unmarked at synchronize() is an error
  bool verify_model = true;      ///< compare names, dtypes and sizes across ranks at construction
  bool uneven_inputs = false;    ///< ranks may run out of data at different steps: enables join()
};

/// Introspection: one entry per bucket, in launch order.
struct bucket_info {
  std::vector<std::size_t> parameters; ///< indices in registration order
  dtype param_type;
  dtype wire_type;
  std::size_t elements;
  bool in_place; ///< the gradients are one contiguous range, reduced where they lie
  bool unpacked; ///< reduced where the gradients lie, tensor by tensor (no packing copies)
};

/// The primary template only diagnoses: it is chosen when an argument is not
/// what it should be, and says which one and how to fix it, once.
template <class Model, class Backend, class Bucketing = bucketing::size_capped<>,
          class Reduction = reduction::mean>
class distributed_data_parallel {
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

public:
  template <class... Args> explicit distributed_data_parallel(Args&&...) {}
};

template <class Model, class Backend, class Bucketing, class Reduction>
requires model<Model> && backend_policy<Backend> && bucketing_policy<Bucketing> && reduction_policy<Reduction>
class distributed_data_parallel<Model, Backend, Bucketing, Reduction> {
public:
  using model_type = Model;
  using backend_type = Backend;

  /// Verifies the model across ranks (names, dtypes, sizes), then copies rank 0's
  /// parameters and buffers to every rank.
  distributed_data_parallel(Model& m, process_group<Backend>& pg, ddp_options o = {})
      : model_(m), pg_(pg), opts_(o) {
    params_ = detail::collect_parameters(m);
    buffers_ = detail::collect_buffers(m);
    detail::check_unique_names(params_, "parameters");
    detail::check_unique_names(buffers_, "buffers");
    if (opts_.verify_model) verify_across_ranks();
    broadcast_state();
    build_buckets();
    index_gradients();
    if (detail::debug() >= detail::debug_level::info && pg_.rank() == 0) log_layout();
  }

  distributed_data_parallel(const distributed_data_parallel&) = delete;
  distributed_data_parallel& operator=(const distributed_data_parallel&) = delete;

  ~distributed_data_parallel() {
    for (auto& b : buckets_)
      if (b.in_flight) try {
          b.in_flight->wait();
        } catch (...) {}
  }

  Model& module() noexcept { return model_; }
  process_group<Backend>& group() noexcept { return pg_; }
  std::size_t num_parameters() const noexcept { return params_.size(); }
  const std::string& parameter_name(std::size_t i) const { return params_.at(i).name; }

  /// The index of the parameter called `name`.
  std::size_t parameter_index(std::string_view name) const {
    for (std::size_t i = 0; i < params_.size(); ++i)
      if (params_[i].name == name) return i;
    throw error(error_kind::config, "no parameter named '" + std::string(name) + "'");
  }

  std::vector<bucket_info> buckets() const {
    std::vector<bucket_info> out;
    for (auto& b : buckets_)
      out.push_back({b.params, b.param_type, b.wire_type, b.elements, b.in_place, b.unpacked});
    return out;
  }

  /// Gradient `index` (registration order) is final for this step; a bucket
  /// whose gradients are all final starts its all-reduce, in bucket order.
  void mark_grad_ready(std::size_t index) { mark(index, mark_state::ready); }
  template <tensor G> void mark_grad_ready(const G& grad) { mark(index_of(grad), mark_state::ready); }

  /// This rank has no gradient for `index` this step (a branch it did not take):
  /// its gradient is zeroed, contributes zeros, and still receives the average.
  void mark_unused(std::size_t index) { mark(index, mark_state::unused); }
  template <tensor G> void mark_unused(const G& grad) { mark(index_of(grad), mark_state::unused); }

  /// Launches what is left (unmarked gradients count as ready unless
  /// strict_marking), waits, and leaves the reduced gradients in the model's
  /// gradient tensors on every rank. Inside no_sync(), does nothing but end the step.
  void synchronize() {
    if (no_sync_depth_ > 0) {
      reset_step();
      return;
    }
    begin_step();
    for (std::size_t i = 0; i < params_.size(); ++i) {
      if (marks_[i] != mark_state::pending) continue;
      if (opts_.strict_marking) {
        wait_launched_quietly();
        reset_step();
        throw error(error_kind::config,
                    "rank " + std::to_string(pg_.rank()) + ": gradient of parameter '" + params_[i].name +
                        "' was not marked ready before synchronize() (strict_marking is on: "
                        "call mark_grad_ready or mark_unused for it)",
                    pg_.rank());
      }
      marks_[i] = mark_state::ready;
      --buckets_[bucket_of_[i]].pending;
    }
    launch_ready_buckets();
    try {
      for (auto& b : buckets_)
        finish(b);
      if (opts_.broadcast_buffers && !buffers_.empty()) sync_buffers();
    } catch (...) {
      wait_launched_quietly();
      reset_step();
      throw;
    }
    if (detail::debug() >= detail::debug_level::detail && pg_.rank() == 0) log_step_timing();
    reset_step();
  }

  /// While the guard lives, gradients accumulate locally: marks are ignored
  /// and synchronize() communicates nothing.
  class no_sync_guard {
  public:
    explicit no_sync_guard(distributed_data_parallel& d) : d_(&d) { ++d_->no_sync_depth_; }
    no_sync_guard(no_sync_guard&& o) noexcept : d_(std::exchange(o.d_, nullptr)) {}
    no_sync_guard(const no_sync_guard&) = delete;
    no_sync_guard& operator=(const no_sync_guard&) = delete;
    no_sync_guard& operator=(no_sync_guard&&) = delete;
    ~no_sync_guard() {
      if (d_) --d_->no_sync_depth_;
    }

  private:
    distributed_data_parallel* d_;
  };
  [[nodiscard]] no_sync_guard no_sync() {
    if (step_started_)
      throw error(error_kind::config, "no_sync() entered in the middle of a step (gradients already marked): "
                                      "enter it before backward");
    return no_sync_guard(*this);
  }

  /// Copies rank 0's buffers (running statistics and such) to every rank.
  void sync_buffers() {
    if (!step_started_) refresh_pointers(); // inside a step, begin_step() did
    std::vector<work> ws;
    for (auto& s : buffers_)
      ws.push_back(pg_.communicator().broadcast(s.value, s.count, s.type, 0));
    for (auto& w : ws)
      w.wait();
  }

  /// For uneven inputs (options.uneven_inputs on every rank): a rank that has
  /// run out of data calls join(). Until every rank has joined, it shadows the
  /// others' steps, contributing zero gradients, so their collectives complete.
  /// Like PyTorch's Join with divide_by_initial_world_size: averages keep
  /// dividing by the full world size, so joined ranks count as zeros.
  void join() {
    if (!opts_.uneven_inputs)
      throw error(error_kind::config, "join() needs ddp_options::uneven_inputs = true on every rank");
    if (step_started_) throw error(error_kind::config, "join() called in the middle of a step");
    for (;;) {
      std::int32_t active = 0;
      pg_.communicator().all_reduce(&active, 1, dtype::i32, op::sum, true).wait();
      if (active == 0) return;
      std::vector<work> ws;
      for (auto& b : buckets_) {
        if (detail::debug() >= detail::debug_level::detail)
          check_same_bucket_everywhere(b); // as launch() does
        b.shadow.assign(b.elements * size_of(b.wire_type), std::byte{0});
        // The same collective the others run, with the same scale: in the ring, a
        // chunk this rank owns is averaged here.
        ws.push_back(reduce_bucket(b, b.shadow.data(), mean_scale()));
      }
      for (auto& w : ws)
        w.wait();
      if (opts_.broadcast_buffers && !buffers_.empty()) sync_buffers();
    }
  }

private:
  enum class mark_state : std::uint8_t { pending, ready, unused };

  /// Whether the backend reduces a bucket as a list of fragments (Gloo does).
  static constexpr bool fragments_supported =
      requires(typename Backend::communicator & c, std::vector<detail::fragment> f) {
    c.all_reduce_fragments(std::move(f), dtype::f32, 1.0);
  };
  /// Below this average tensor size a bucket is packed: one message per tiny
  /// tensor costs more than two copies of the bucket. 64 KiB packs the 1 KiB
  /// tensors of bench/grad_sync's many_small case and leaves ResNet-50's
  /// convolutions unpacked (both cases are measured there).
  static constexpr std::size_t unpacked_min_average_bytes = std::size_t{64} << 10;

  struct bucket {
    std::vector<std::size_t> params;
    dtype param_type = dtype::f32, wire_type = dtype::f32;
    std::size_t elements = 0;
    std::vector<std::size_t> offsets; // element offset of each param in the bucket
    bool in_place = false;            // wire == param type and the gradients are contiguous
    bool unpacked = false;            // reduced as fragments where the gradients lie (no buffer)
    std::vector<std::byte> buffer;    // packed wire data (allocated once, reused)
    std::vector<std::byte> shadow;    // zeros for join()
    std::size_t pending = 0;
    std::optional<ddp::work> in_flight;
    std::chrono::steady_clock::time_point t_launch, t_done;
  };

  void* wire_data(bucket& b) { return b.in_place ? params_[b.params.front()].grad : b.buffer.data(); }

  void verify_across_ranks() {
    auto desc = detail::describe(params_, buffers_);
    const auto w = static_cast<std::size_t>(pg_.size());
    std::vector<std::int64_t> len{static_cast<std::int64_t>(desc.size())}, lens(w);
    pg_.all_gather(len, lens);
    std::size_t longest = 0;
    for (auto l : lens)
      longest = std::max(longest, static_cast<std::size_t>(l));
    std::vector<std::uint8_t> mine(longest, 0), all(longest * w);
    std::memcpy(mine.data(), desc.data(), desc.size());
    pg_.all_gather(mine, all);
    auto of = [&](std::size_t r) {
      return std::string(reinterpret_cast<const char*>(all.data() + r * longest),
                         static_cast<std::size_t>(lens[r]));
    };
    const std::string d0 = of(0);
    for (std::size_t r = 1; r < w; ++r) {
      auto diff = detail::first_difference(d0, of(r), static_cast<int>(r));
      if (!diff.empty())
        throw error(error_kind::mismatch,
                    "the model differs between ranks: " + diff +
                        ". Every rank must build the same model (same parameters, in the "
                        "same order, with the same dtypes and sizes).",
                    static_cast<int>(r));
    }
  }

  void broadcast_state() {
    std::vector<work> ws;
    for (auto* list : {&params_, &buffers_})
      for (auto& s : *list)
        ws.push_back(pg_.communicator().broadcast(s.value, s.count, s.type, 0));
    for (auto& w : ws)
      w.wait();
  }

  void build_buckets() {
    std::vector<parameter_desc> descs;
    for (auto& p : params_)
      descs.push_back({p.name, p.type, p.count, p.count * size_of(p.type)});
    auto assignment = Bucketing::assign(std::span<const parameter_desc>(descs));
    std::vector<int> seen(params_.size(), 0);
    bucket_of_.assign(params_.size(), 0);
    for (auto& members : assignment) {
      if (members.empty()) throw error(error_kind::config, "the bucketing policy produced an empty bucket");
      bucket b;
      b.params = members;
      b.param_type = params_.at(members.front()).type;
      b.wire_type = Reduction::wire(b.param_type);
      for (auto i : members) {
        if (i >= params_.size())
          throw error(error_kind::config, "the bucketing policy named parameter " + std::to_string(i) +
                                              " of " + std::to_string(params_.size()));
        if (seen[i]++)
          throw error(error_kind::config,
                      "the bucketing policy put parameter '" + params_[i].name + "' in two buckets");
        if (params_[i].type != b.param_type)
          throw error(error_kind::config, "the bucketing policy mixed dtypes in one bucket ('" +
                                              params_[i].name + "' is " +
                                              std::string(to_string(params_[i].type)) + ")");
        b.offsets.push_back(b.elements);
        b.elements += params_[i].count;
        bucket_of_[i] = buckets_.size();
      }
      buckets_.push_back(std::move(b));
    }
    for (std::size_t i = 0; i < params_.size(); ++i)
      if (!seen[i])
        throw error(error_kind::config, "the bucketing policy left parameter '" + params_[i].name + "' out");
    marks_.assign(params_.size(), mark_state::pending);
    layout_buckets();
    reset_step();
  }

  /// In place when the wire type is the gradient type and the bucket's gradients
  /// lie back to back in bucket order; otherwise a packing buffer, kept across steps.
  void layout_buckets() {
    for (auto& b : buckets_) {
      bool contiguous = b.wire_type == b.param_type;
      auto* base = static_cast<std::byte*>(params_[b.params.front()].grad);
      for (std::size_t k = 0; contiguous && k < b.params.size(); ++k)
        contiguous =
            static_cast<std::byte*>(params_[b.params[k]].grad) == base + b.offsets[k] * size_of(b.param_type);
      b.in_place = contiguous;
      // No packing when the backend reduces fragments and the tensors are large
      // enough that a message each costs less than two copies of the bucket.
      const std::size_t average_bytes = b.elements * size_of(b.param_type) / b.params.size();
      b.unpacked = fragments_supported && b.wire_type == b.param_type &&
                   (b.in_place || average_bytes >= unpacked_min_average_bytes);
      if (!b.in_place && !b.unpacked)
        b.buffer.resize(b.elements * size_of(b.wire_type));
      else
        b.buffer = {};
    }
  }

  void index_gradients() {
    grad_index_.clear();
    for (std::size_t i = 0; i < params_.size(); ++i)
      grad_index_[params_[i].grad] = i;
  }

  /// Gradient storage may have moved since the last step (a resized Eigen
  /// matrix): walk the model again, and refuse changed sizes.
  void refresh_pointers() {
    if (detail::same_storage(model_, params_, buffers_)) return; // the common case: nothing moved
    auto params = detail::collect_parameters(model_);
    auto buffers = detail::collect_buffers(model_);
    check_unchanged(params, params_, "parameter");
    check_unchanged(buffers, buffers_, "buffer");
    params_ = std::move(params);
    buffers_ = std::move(buffers);
    layout_buckets();
    index_gradients();
  }

  /// Storage may move between steps; names, sizes and count may not.
  void check_unchanged(const std::vector<detail::tensor_slot>& now,
                       const std::vector<detail::tensor_slot>& before, const char* what) const {
    for (std::size_t i = 0; i < before.size(); ++i)
      if (i >= now.size() || now[i].count != before[i].count || now[i].name != before[i].name)
        throw error(error_kind::config,
                    "rank " + std::to_string(pg_.rank()) + ": " + what + " '" + before[i].name +
                        "' changed its name or size after distributed_data_parallel was built");
    if (now.size() != before.size())
      throw error(error_kind::config, std::string("the model's ") + what +
                                          " count changed after distributed_data_parallel was built");
  }

  template <tensor G> std::size_t index_of(const G& grad) {
    auto s = as_span(const_cast<G&>(grad));
    auto it = grad_index_.find(static_cast<const void*>(s.data()));
    if (it == grad_index_.end()) {
      refresh_pointers();
      it = grad_index_.find(static_cast<const void*>(s.data()));
    }
    if (it == grad_index_.end())
      throw error(error_kind::config,
                  "rank " + std::to_string(pg_.rank()) +
                      ": mark_grad_ready/mark_unused got a tensor that is not the gradient of "
                      "any parameter (pass the gradient tensor itself, or an index)");
    return it->second;
  }

  void begin_step() {
    if (step_started_) return;
    step_started_ = true;
    refresh_pointers();
    if (opts_.uneven_inputs) {
      // Joined ranks are waiting on this: one all-reduce of "still training" per step.
      active_flag_ = 1;
      pending_flag_ = pg_.communicator().all_reduce(&active_flag_, 1, dtype::i32, op::sum);
    }
  }

  void mark(std::size_t index, mark_state how) {
    if (index >= params_.size())
      throw error(error_kind::config, "rank " + std::to_string(pg_.rank()) + ": parameter index " +
                                          std::to_string(index) + " is out of range (" +
                                          std::to_string(params_.size()) + " parameters)");
    if (no_sync_depth_ > 0) return;
    begin_step();
    if (marks_[index] != mark_state::pending)
      throw error(error_kind::config,
                  "rank " + std::to_string(pg_.rank()) + ": gradient of parameter '" + params_[index].name +
                      "' was marked twice in one step",
                  pg_.rank());
    marks_[index] = how;
    if (how == mark_state::unused) {
      auto& p = params_[index];
      std::memset(p.grad, 0, p.count * size_of(p.type));
    }
    auto& b = buckets_[bucket_of_[index]];
    if (--b.pending == 0) launch_ready_buckets();
  }

  /// Starts every bucket that is complete, strictly in bucket order.
  void launch_ready_buckets() {
    while (next_launch_ < buckets_.size() && buckets_[next_launch_].pending == 0)
      launch(buckets_[next_launch_++]);
  }

  void launch(bucket& b) {
    if (detail::debug() >= detail::debug_level::detail) check_same_bucket_everywhere(b);
    const double scale = mean_scale();
    b.t_launch = std::chrono::steady_clock::now();
    if (b.unpacked) { // reduced where the gradients lie, the averaging fused into the ring
      b.in_flight = reduce_bucket(b, nullptr, scale);
      return;
    }
    if (b.in_place) {
      if (scale != 1.0) detail::scale_in_place(wire_data(b), b.elements, b.param_type, scale);
    } else {
      const std::size_t wsize = size_of(b.wire_type);
      for (std::size_t k = 0; k < b.params.size(); ++k) {
        auto& p = params_[b.params[k]];
        detail::copy_scaled(b.buffer.data() + b.offsets[k] * wsize, b.wire_type, p.grad, p.type, p.count,
                            scale);
      }
    }
    b.in_flight = reduce_bucket(b, nullptr, 1.0);
  }

  double mean_scale() const { return Reduction::average ? 1.0 / pg_.size() : 1.0; }

  /// Starts the all-reduce of bucket b. For a packed bucket `zeros` (if given)
  /// replaces its buffer; for an unpacked one, it replaces the gradients, cut
  /// into the same fragments, so a joined rank's shadow matches message for message.
  work reduce_bucket(bucket& b, std::byte* zeros, double scale) {
    if constexpr (fragments_supported) {
      if (b.unpacked) {
        std::vector<detail::fragment> frags;
        const std::size_t wsize = size_of(b.wire_type);
        if (b.in_place) {
          frags.push_back({zeros ? zeros : wire_data(b), b.elements});
        } else {
          for (std::size_t k = 0; k < b.params.size(); ++k) {
            auto& p = params_[b.params[k]];
            frags.push_back({zeros ? zeros + b.offsets[k] * wsize : p.grad, p.count});
          }
        }
        return pg_.communicator().all_reduce_fragments(std::move(frags), b.wire_type, scale);
      }
    }
    return pg_.communicator().all_reduce(zeros ? zeros : wire_data(b), b.elements, b.wire_type, op::sum);
  }

  /// DDP_DEBUG=DETAIL: every rank must be launching the same bucket; say who is not.
  void check_same_bucket_everywhere(const bucket& b) {
    const auto w = static_cast<std::size_t>(pg_.size());
    std::vector<std::int64_t> mine{static_cast<std::int64_t>(&b - buckets_.data()),
                                   static_cast<std::int64_t>(b.elements),
                                   static_cast<std::int64_t>(b.wire_type)},
        all(3 * w);
    pg_.all_gather(mine, all);
    for (std::size_t r = 1; r < w; ++r)
      if (all[3 * r] != all[0] || all[3 * r + 1] != all[1] || all[3 * r + 2] != all[2])
        throw error(error_kind::mismatch,
                    "collective mismatch: rank 0 launches bucket " + std::to_string(all[0]) + " (" +
                        std::to_string(all[1]) + " elements) but rank " + std::to_string(r) +
                        " launches bucket " + std::to_string(all[3 * r]) + " (" +
                        std::to_string(all[3 * r + 1]) +
                        " elements): the ranks disagree on this step's gradients",
                    static_cast<int>(r));
  }

  /// Waits for bucket b and unpacks it into the gradients.
  void finish(bucket& b) {
    if (!b.in_flight) return;
    auto w = std::move(*b.in_flight);
    b.in_flight.reset();
    w.wait();
    b.t_done = std::chrono::steady_clock::now();
    if (!b.in_place && !b.unpacked) {
      const std::size_t wsize = size_of(b.wire_type);
      for (std::size_t k = 0; k < b.params.size(); ++k) {
        auto& p = params_[b.params[k]];
        detail::copy_scaled(p.grad, p.type, b.buffer.data() + b.offsets[k] * wsize, b.wire_type, p.count,
                            1.0);
      }
    }
  }

  void wait_launched_quietly() {
    for (auto& b : buckets_)
      if (b.in_flight) {
        try {
          b.in_flight->wait();
        } catch (...) {}
        b.in_flight.reset();
      }
  }

  void reset_step() {
    if (pending_flag_) {
      try {
        pending_flag_->wait();
      } catch (...) {}
      pending_flag_.reset();
    }
    std::fill(marks_.begin(), marks_.end(), mark_state::pending);
    for (auto& b : buckets_) {
      b.pending = b.params.size();
    }
    next_launch_ = 0;
    step_started_ = false;
  }

  void log_layout() const {
    std::string s = "distributed_data_parallel: " + std::to_string(params_.size()) + " parameters in " +
                    std::to_string(buckets_.size()) + " buckets (launch order):";
    for (std::size_t i = 0; i < buckets_.size(); ++i) {
      auto& b = buckets_[i];
      s += "\n  bucket " + std::to_string(i) + ": " + std::to_string(b.params.size()) + " tensors, " +
           std::to_string(b.elements) + " x " + std::string(to_string(b.param_type)) +
           (b.wire_type != b.param_type ? " sent as " + std::string(to_string(b.wire_type)) : "") +
           (b.in_place   ? ", in place"
            : b.unpacked ? ", unpacked fragments"
                         : ", packed") +
           " [" + params_[b.params.front()].name +
           (b.params.size() > 1 ? " .. " + params_[b.params.back()].name : "") + "]";
    }
    detail::log_line("rank 0", s);
  }

  void log_step_timing() const {
    std::string s = "step timing (ms from launch to done):";
    for (std::size_t i = 0; i < buckets_.size(); ++i)
      s += " b" + std::to_string(i) + "=" +
           std::to_string(
               std::chrono::duration<double, std::milli>(buckets_[i].t_done - buckets_[i].t_launch).count());
    detail::log_line("rank 0", s);
  }

  Model& model_;
  process_group<Backend>& pg_;
  ddp_options opts_;
  std::vector<detail::tensor_slot> params_, buffers_;
  std::vector<bucket> buckets_;
  std::vector<std::size_t> bucket_of_;
  std::vector<mark_state> marks_;
  std::unordered_map<const void*, std::size_t> grad_index_;
  std::size_t next_launch_ = 0;
  bool step_started_ = false;
  int no_sync_depth_ = 0;
  std::int32_t active_flag_ = 1;
  std::optional<work> pending_flag_;
};

template <class M, class B>
distributed_data_parallel(M&, process_group<B>&) -> distributed_data_parallel<M, B>;
template <class M, class B>
distributed_data_parallel(M&, process_group<B>&, ddp_options) -> distributed_data_parallel<M, B>;

DDP_END_NAMESPACE

#endif // DDP_DATA_PARALLEL_HPP
