// Rank 0's progress line: redrawn in place on a terminal (at most 5 times a
// second), a plain line every tenth of an epoch otherwise (logs, ddprun pipes).
#pragma once

#include <chrono>
#include <cstdio>
#include <string>
#include <unistd.h>

namespace example {

class progress {
public:
  progress(int epoch, int epochs, std::size_t steps, bool enabled)
      : epoch_(epoch), epochs_(epochs), steps_(steps), enabled_(enabled), tty_(::isatty(STDOUT_FILENO) != 0),
        start_(clock::now()), last_(start_) {}

  void update(std::size_t step, std::size_t samples, double loss) {
    if (!enabled_ || steps_ == 0) return;
    auto now = clock::now();
    bool due = tty_ ? now - last_ > std::chrono::milliseconds(200) || step == steps_
                    : step * 10 / steps_ != (step - 1) * 10 / steps_;
    if (!due) return;
    last_ = now;
    const double s = std::chrono::duration<double>(now - start_).count();
    const double eta = step ? s / static_cast<double>(step) * static_cast<double>(steps_ - step) : 0.0;
    std::printf("%sepoch %d/%d  step %zu/%zu  %.0f samples/s  loss %.4f  ETA %.1fs%s", tty_ ? "\r\033[K" : "",
                epoch_, epochs_, step, steps_, s > 0 ? static_cast<double>(samples) / s : 0.0, loss, eta,
                tty_ ? "" : "\n");
    std::fflush(stdout);
  }

  void finish() {
    if (enabled_ && tty_) std::printf("\r\033[K");
  }

private:
  using clock = std::chrono::steady_clock;
  int epoch_, epochs_;
  std::size_t steps_;
  bool enabled_, tty_;
  clock::time_point start_, last_;
};

} // namespace example
