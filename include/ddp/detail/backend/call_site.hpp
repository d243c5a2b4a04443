// The user-level call a collective belongs to, when it belongs to one: a
// step of distributed_data_parallel or sharded_data_parallel, and the bucket.
// The data-parallel class sets it on its thread around each bucket's
// submission (call_site_scope); the queue names the call in the collective's
// description, and a backend with a header (Gloo's) sends the step along, so
// that ranks at different steps stop at their first bucket instead of
// reducing one step's gradients with another's (see docs/design-notes.md,
// "Note [step check]"). A thread-local, like trace::submitting_bucket: no new
// parameter on every backend's collectives.
#ifndef DDP_DETAIL_BACKEND_CALL_SITE_HPP
#define DDP_DETAIL_BACKEND_CALL_SITE_HPP

#include <ddp/config.hpp>
#include <ddp/detail/common/message.hpp>

#include <cstdint>
#include <string>

DDP_BEGIN_NAMESPACE
namespace detail {

/// Which user-level call: sent in headers, so a small fixed code.
enum class call_kind : std::uint8_t { none = 0, ddp_synchronize, sharded_synchronize, ddp_rebuild_buckets };

constexpr const char* to_string(call_kind c) noexcept {
  switch (c) {
  case call_kind::none: return "";
  case call_kind::ddp_synchronize: return "distributed_data_parallel::synchronize";
  case call_kind::sharded_synchronize: return "sharded_data_parallel::synchronize";
  case call_kind::ddp_rebuild_buckets: return "distributed_data_parallel::synchronize's bucket rebuild";
  }
  return "";
}

struct call_site {
  call_kind call = call_kind::none;
  std::uint32_t step = 0; ///< synchronize() calls before this one, no_sync() ones included
  std::uint32_t bucket = 0, buckets = 0;
  /// This rank's gradients still hold what its last synchronize() left
  /// (gradient_fingerprint): when every rank says so, the step is refused.
  bool repeat = false;
  /// And this rank knows it (it marked every gradient of its last step, none
  /// since): a peer at its next step means this rank called synchronize() alone.
  bool certain_repeat = false;
  /// ddp_options::check_finite: the parameter whose gradient on this rank
  /// holds NaN or Inf, plus one (0: none); every rank stops at its header.
  std::uint32_t non_finite = 0;
  /// Names a parameter by index for a message (the data-parallel object's own, for a peer's finding).
  std::string (*parameter_name)(const void* names, std::uint32_t index) = nullptr;
  const void* names = nullptr;

  explicit operator bool() const noexcept { return call != call_kind::none; }
  /// "distributed_data_parallel::synchronize, step 7, bucket 2 of 3"
  std::string describe() const {
    return detail::message({to_string(call), ", step ", step, ", bucket ", bucket, " of ", buckets});
  }
};

/// The call whose collective this thread is submitting (or, on a backend's
/// worker, running).
inline thread_local call_site current_call{};

/// Sets current_call for a scope, restoring the previous one.
class call_site_scope {
public:
  explicit call_site_scope(const call_site& c) noexcept : saved_(current_call) { current_call = c; }
  call_site_scope(const call_site_scope&) = delete;
  call_site_scope& operator=(const call_site_scope&) = delete;
  ~call_site_scope() { current_call = saved_; }

private:
  call_site saved_;
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_BACKEND_CALL_SITE_HPP
