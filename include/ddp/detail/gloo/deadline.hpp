// One deadline for a whole Gloo collective that is made of many transport
// waits. Gloo's waitRecv/waitSend take a relative timeout each; passing the
// group's full timeout to every one of them would let a collective of N
// steps wait N times as long as the user asked for. The header round
// (detail/gloo/header.hpp) and the fragment ring (detail/gloo/ring.hpp) both count down
// from one absolute time point instead.
#ifndef DDP_DETAIL_GLOO_DEADLINE_HPP
#define DDP_DETAIL_GLOO_DEADLINE_HPP

#include <ddp/config.hpp>

#include <gloo/common/error.h>

#include <algorithm>
#include <chrono>
#include <string>

DDP_BEGIN_NAMESPACE
namespace detail {

class gloo_deadline {
public:
  gloo_deadline() = default;
  explicit gloo_deadline(std::chrono::milliseconds timeout)
      : at_(std::chrono::steady_clock::now() + timeout) {}

  /// What is left, for the next transport wait. Never below 1 ms: a deadline
  /// that has passed still gets one short wait (data that already arrived is
  /// taken), and Gloo reads -1 ms as "use the context's timeout" (kUnsetTimeout).
  std::chrono::milliseconds remaining() const {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(at_ - std::chrono::steady_clock::now());
    return std::max(left, std::chrono::milliseconds(1));
  }

  /// Turns a transport wait that returned false (timed out) into the
  /// IoException the rest of the backend already handles for Gloo's own
  /// collectives, so every timeout takes the same lost-rank path.
  static void check(bool ok, const char* what) {
    if (!ok) throw ::gloo::IoException(std::string("Timed out waiting for a ") + what);
  }

private:
  std::chrono::steady_clock::time_point at_{};
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_GLOO_DEADLINE_HPP
