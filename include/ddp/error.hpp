// ddp::error — the one exception type ddp throws, with a kind to branch on.
#ifndef DDP_ERROR_HPP
#define DDP_ERROR_HPP

#include <ddp/config.hpp>
#include <ddp/detail/common/linkage.hpp>

#include <stdexcept>
#include <string>
#include <string_view>

DDP_BEGIN_NAMESPACE

enum class error_kind {
  config,    ///< bad environment variable, option or argument
  timeout,   ///< a wait ran past its deadline
  peer_lost, ///< another rank went away (rank() names it when known)
  mismatch,  ///< ranks disagree on a model or collective shape
  backend,   ///< Gloo/NCCL/CUDA/OS failure, wrapped
  data,      ///< a data or checkpoint file is missing or corrupt
};

constexpr std::string_view to_string(error_kind k) noexcept {
  switch (k) {
  case error_kind::config: return "config";
  case error_kind::timeout: return "timeout";
  case error_kind::peer_lost: return "peer_lost";
  case error_kind::mismatch: return "mismatch";
  case error_kind::backend: return "backend";
  case error_kind::data: return "data";
  }
  return "unknown";
}

/// The exit status of a rank that ends on an uncaught ddp::error, once a process group was
/// initialized: its message is on stderr, and ddprun's summary quotes it (EX_SOFTWARE).
inline constexpr int uncaught_error_exit_code = 70;

class error : public std::runtime_error {
public:
  /// `rank` is the rank the error is about (the lost peer, the mismatching
  /// rank), or -1 when unknown / not applicable. A config error that begins
  /// "rank N:" (this rank's own mistake) is about rank N.
  DDP_INLINE error(error_kind kind, const std::string& what, int rank = -1);

  error_kind kind() const noexcept { return kind_; }
  int rank() const noexcept { return rank_; }
  /// what() without its "ddp <kind> error: " prefix, for quoting inside another message.
  std::string_view message() const noexcept { return what_string().substr(prefix_); }

private:
  std::string_view what_string() const noexcept { return what(); }

  /// N of a message that begins "rank N:", else -1.
  DDP_INLINE static int leading_rank(std::string_view what) noexcept;

  error_kind kind_;
  int rank_;
  std::size_t prefix_;
};

DDP_END_NAMESPACE

#if DDP_DETAIL_DEFINE_RUNTIME
#include <ddp/error-inl.hpp>
#endif

#endif // DDP_ERROR_HPP
