#include "elastic_wait.hpp"

#include "signals.hpp"

#include <poll.h>

namespace ddprun {

bool poll_until(const std::function<bool()>& done, steady::time_point deadline) {
  constexpr auto every = std::chrono::milliseconds(50);
  for (;;) {
    if (done()) return true;
    if (steady::now() >= deadline) return false;
    pollfd fd{user_signal_fd(), POLLIN, 0};
    ::poll(&fd, 1, static_cast<int>(every.count()));
    if (auto sig = take_user_signal())
      throw job_ends(128 + *sig, "interrupted by signal " + std::to_string(*sig) + " between rounds");
  }
}

steady::duration seconds(double s) {
  return std::chrono::duration_cast<steady::duration>(std::chrono::duration<double>(s));
}

} // namespace ddprun
